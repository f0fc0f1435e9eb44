#include "core/sample/datastore.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "driver-sim/driver/datastore_writer.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A zeroed datastore image with the header of docs/driver-interface.md#datastore-layout /
// driver-sim/README.md.
std::vector<std::byte> Image() {
  std::vector<std::byte> b(262144);
  std::memcpy(b.data(), "nds\0", 4);
  const int32_t version = 1;
  std::memcpy(b.data() + 4, &version, 4);
  return b;
}

void PutU64(std::vector<std::byte>& b, size_t offset, uint64_t v) {
  std::memcpy(b.data() + offset, &v, 8);
}

DatastoreRecord Parse(const std::vector<std::byte>& b) {
  absl::StatusOr<DatastoreRecord> r = ParseDatastore(b, 3, 4711, "ds/3.4711");
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : DatastoreRecord{};
}

// Offsets written literally from docs/driver-interface.md#datastore-layout and the README's worked
// examples.
TEST(ParseDatastore, CoreCountersOfSlots0To3OriginalAndExtended) {
  std::vector<std::byte> b = Image();
  PutU64(b, 256, 11);    // core 0, index 0 (TIME_IN_USE)
  PutU64(b, 264, 12);    // core 0, index 1 (INFER_COMPLETED), README example
  PutU64(b, 504, 13);    // core 1, index 0: 256 + 248
  PutU64(b, 1240, 14);   // core 3, index 30 (OOB): 256 + 3*248 + 30*8
  PutU64(b, 55936, 15);  // core 0, index 31: first extended entry
  PutU64(b, 57032, 16);  // core 2, index 40 (HW_ERR_REPAIRABLE_HBM_UE), README example
  PutU64(b, 57472, 17);  // core 3, index 31: 55936 + 3*512
  PutU64(b, 57976, 18);  // core 3, index 94: 55936 + 3*512 + 63*8
  const DatastoreRecord r = Parse(b);
  EXPECT_EQ(r.Core(0, 0), 11u);
  EXPECT_EQ(r.Core(0, 1), 12u);
  EXPECT_EQ(r.Core(1, 0), 13u);
  EXPECT_EQ(r.Core(3, 30), 14u);
  EXPECT_EQ(r.Core(0, 31), 15u);
  EXPECT_EQ(r.Core(2, 40), 16u);
  EXPECT_EQ(r.Core(3, 31), 17u);
  EXPECT_EQ(r.Core(3, 94), 18u);
  EXPECT_EQ(r.Core(1, 1), 0u);
}

TEST(ParseDatastore, CoreCountersOfSlots4To15AreFullSets) {
  std::vector<std::byte> b = Image();
  PutU64(b, 57984, 21);  // core 4, index 0
  PutU64(b, 58752, 22);  // core 5, index 0: 57984 + 768, README example
  PutU64(b, 58760, 23);  // core 5, index 1
  PutU64(b, 67184, 24);  // core 15, index 94: 57984 + 11*768 + 94*8
  PutU64(b, 67192, 99);  // core 15, entry 95: padding, never a counter
  const DatastoreRecord r = Parse(b);
  EXPECT_EQ(r.Core(4, 0), 21u);
  EXPECT_EQ(r.Core(5, 0), 22u);
  EXPECT_EQ(r.Core(5, 1), 23u);
  EXPECT_EQ(r.Core(15, 94), 24u);
  for (int slot = 0; slot < 16; ++slot) {
    for (int i = 0; i < 95; ++i) {
      if (r.Core(slot, i) == 99u) {
        ADD_FAILURE() << "padding read as slot " << slot << " index " << i;
      }
    }
  }
}

TEST(ParseDatastore, DeviceCountersAndVersionWord) {
  std::vector<std::byte> b = Image();
  PutU64(b, 8, (uint64_t{2} << 40) | (uint64_t{24} << 32) | 7);  // RUNTIME_VERSION 2.24.7
  PutU64(b, 8 + 12 * 8, 5);                                      // DEVICE_CLUSTER_ID
  PutU64(b, 248, 77);                                            // index 30
  const DatastoreRecord r = Parse(b);
  EXPECT_EQ(r.format_version, 1);
  EXPECT_EQ(r.device_counters[12], 5u);
  EXPECT_EQ(r.device_counters[30], 77u);
  const NdsVersion v = UnpackVersionWord(r.device_counters[0]);
  EXPECT_EQ(v, (NdsVersion{2, 24, 7}));
}

// The agent reads no byte outside the header and the counter sections of the driver's layout
// (docs/driver-interface.md#datastore-layout): the object area holds the runtime's records in its
// own format, read only through libnrt (core/sample/runtime_records.h), and the rest is unused.
TEST(ParseDatastore, NoByteOutsideTheCounterLayoutIsRead) {
  std::vector<std::byte> clean = Image();
  PutU64(clean, 264, 12);
  PutU64(clean, 57032, 16);
  PutU64(clean, 67184, 24);
  std::vector<std::byte> noisy = clean;
  uint32_t x = 12345;
  auto fill = [&](size_t from, size_t to) {
    for (size_t i = from; i < to; ++i)
      noisy[i] = std::byte(static_cast<uint8_t>(x = x * 1103515245 + 12345));
  };
  fill(1248, 55936);    // the object area and the retired section
  fill(67200, 262144);  // everything past the layout
  const DatastoreRecord a = Parse(clean);
  const DatastoreRecord b = Parse(noisy);
  EXPECT_EQ(a.device_counters, b.device_counters);
  EXPECT_EQ(a.core_counters, b.core_counters);
  EXPECT_EQ(b.Core(0, 1), 12u);
  EXPECT_EQ(b.Core(2, 40), 16u);
  EXPECT_EQ(b.Core(15, 94), 24u);
}

TEST(ParseDatastore, WrongSizeAndBadMagicNameTheSource) {
  std::vector<std::byte> b = Image();
  std::vector<std::byte> small(b.begin(), b.begin() + 1000);
  absl::StatusOr<DatastoreRecord> r = ParseDatastore(small, 0, 1, "ds/0.1");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("ds/0.1"));
  b[0] = std::byte{'x'};
  r = ParseDatastore(b, 0, 1, "ds/0.1");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("ds/0.1"));
  EXPECT_THAT(r.status().message(), HasSubstr("magic"));
}

// The simulator's writer (what libnrt-sim maps through the driver) and the agent's parser agree
// on every part of the layout: the bytes a writer leaves in a slot are what a monitor maps.
class WriterParserTest : public ::testing::Test {
 protected:
  sim::DatastoreWriter& Writer() { return *writer_; }
  DatastoreRecord Read() {
    absl::StatusOr<DatastoreRecord> r =
        ParseDatastore(std::as_bytes(std::span(memory_)), 2, 4242, "/dev/neuron2 (pid 4242)");
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *std::move(r) : DatastoreRecord{};
  }

  std::vector<uint8_t> memory_ = std::vector<uint8_t>(nds::kSize);
  std::unique_ptr<sim::DatastoreWriter> writer_ =
      sim::DatastoreWriter::OverMemory(memory_, 2, 4242);
};

TEST_F(WriterParserTest, HeadersAloneParseAsAnIdleProcess) {
  const DatastoreRecord r = Read();
  EXPECT_EQ(r.device, 2);
  EXPECT_EQ(r.pid, 4242);
  EXPECT_EQ(r.format_version, 1);
  EXPECT_EQ(r.source, "/dev/neuron2 (pid 4242)");
  EXPECT_EQ(r.Core(0, nds::kTimeInUse), 0u);
  EXPECT_FALSE(r.driver.has_value()) << "only the driver's process list fills it";
}

TEST_F(WriterParserTest, EveryPartTheWriterWritesIsRead) {
  sim::DatastoreWriter& w = Writer();
  ASSERT_TRUE(w.SetCoreCounter(1, nds::kInferCompleted, 99).ok());
  ASSERT_TRUE(w.SetCoreCounter(6, nds::kHwErrHbmUe, 3).ok());  // a full set beyond slot 3
  ASSERT_TRUE(w.SetDeviceCounter(12, 5).ok());
  w.SetRuntimeVersion(2, 24, 7);

  const DatastoreRecord r = Read();
  EXPECT_EQ(r.Core(1, nds::kInferCompleted), 99u);
  EXPECT_EQ(r.Core(6, nds::kHwErrHbmUe), 3u);
  EXPECT_EQ(r.device_counters[12], 5u);
  EXPECT_EQ(UnpackVersionWord(r.device_counters[nds::kRuntimeVersion]), (NdsVersion{2, 24, 7}));
}

// The runtime writes while the monitor reads (no lock): each read sees the counters as they are.
TEST_F(WriterParserTest, EachReadSeesTheLiveValues) {
  sim::DatastoreWriter& w = Writer();
  ASSERT_TRUE(w.SetCoreCounter(0, nds::kTimeInUse, 5).ok());
  DatastoreRecord r = Read();
  EXPECT_EQ(r.Core(0, nds::kTimeInUse), 5u);
  ASSERT_TRUE(w.AddCoreCounter(0, nds::kTimeInUse, 10).ok());
  r = Read();
  EXPECT_EQ(r.Core(0, nds::kTimeInUse), 15u);
}

// The driver zeroes a released slot before it gives it to another process: a monitor that maps
// it then must see "nothing live here" (an error it drops), never a record of zeros.
TEST_F(WriterParserTest, AZeroedSlotIsNoRecord) {
  ASSERT_TRUE(Writer().SetCoreCounter(0, nds::kTimeInUse, 5).ok());
  std::fill(memory_.begin(), memory_.end(), 0);
  absl::StatusOr<DatastoreRecord> r =
      ParseDatastore(std::as_bytes(std::span(memory_)), 2, 4242, "/dev/neuron2 (pid 4242)");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("magic"));
  EXPECT_THAT(r.status().message(), HasSubstr("/dev/neuron2 (pid 4242)"));
}

// The driver back end without a driver (docs/architecture.md#unknown-is-not-zero): the source is
// known to be down, with the reason in the user's words, and a read finds nothing rather than
// failing.
class DriverReaderTest : public ::testing::Test {
 protected:
  SourceState ProbedState(std::vector<int> devices) {
    reader_ = MakeDriverDatastoreReader(RootPaths(tmp_.path()), {.devices = std::move(devices)});
    EXPECT_TRUE(reader_->AwaitFirstProbe(std::chrono::seconds(10)));
    return reader_->State();
  }
  void Write(const std::string& relative) {
    fs::create_directories((tmp_.path() / relative).parent_path());
    std::ofstream(tmp_.path() / relative) << "";
  }

  ::neuron::testing::TempDir tmp_{"datastore_test"};
  std::unique_ptr<DatastoreReader> reader_;
};

TEST_F(DriverReaderTest, MissingDeviceNodeIsSaid) {
  const SourceState s = ProbedState({0});
  EXPECT_TRUE(s.known);
  EXPECT_FALSE(s.up);
  EXPECT_THAT(s.reason, HasSubstr("no device node " + (tmp_.path() / "dev/neuron0").string()));
  const DatastoreScan scan = reader_->ReadAll();
  EXPECT_THAT(scan.records, IsEmpty());
  EXPECT_THAT(scan.errors, IsEmpty());
  EXPECT_THAT(reader_->List(), IsEmpty());
  EXPECT_EQ(reader_->name(), "driver");
}

TEST_F(DriverReaderTest, DeviceNodeWithoutADriverIsSaid) {
  Write("dev/neuron0");  // the simulator's placeholder without `neuron-sim up`: a plain file
  const SourceState s = ProbedState({0});
  EXPECT_TRUE(s.known);
  EXPECT_FALSE(s.up);
  EXPECT_THAT(s.reason, HasSubstr((tmp_.path() / "dev/neuron0").string()));
  EXPECT_THAT(s.reason, HasSubstr("no Neuron driver answers its ioctls"));
  EXPECT_THAT(reader_->ReadAll().records, IsEmpty());
}

TEST_F(DriverReaderTest, NoDevicesIsNotUp) {
  const SourceState s = ProbedState({});
  EXPECT_TRUE(s.known);
  EXPECT_FALSE(s.up);
  EXPECT_THAT(s.reason, HasSubstr("no Neuron devices"));
}

}  // namespace
}  // namespace neuron
