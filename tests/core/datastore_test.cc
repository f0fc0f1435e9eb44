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
void PutU32(std::vector<std::byte>& b, size_t offset, uint32_t v) {
  std::memcpy(b.data() + offset, &v, 4);
}
void PutBytes(std::vector<std::byte>& b, size_t offset, std::string_view s) {
  std::memcpy(b.data() + offset, s.data(), s.size());
}

DatastoreRecord Parse(const std::vector<std::byte>& b, std::vector<std::string>* warnings) {
  absl::StatusOr<DatastoreRecord> r = ParseDatastore(b, 3, 4711, "ds/3.4711", warnings);
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
  std::vector<std::string> warnings;
  const DatastoreRecord r = Parse(b, &warnings);
  EXPECT_EQ(r.Core(0, 0), 11u);
  EXPECT_EQ(r.Core(0, 1), 12u);
  EXPECT_EQ(r.Core(1, 0), 13u);
  EXPECT_EQ(r.Core(3, 30), 14u);
  EXPECT_EQ(r.Core(0, 31), 15u);
  EXPECT_EQ(r.Core(2, 40), 16u);
  EXPECT_EQ(r.Core(3, 31), 17u);
  EXPECT_EQ(r.Core(3, 94), 18u);
  EXPECT_EQ(r.Core(1, 1), 0u);
  EXPECT_THAT(warnings, IsEmpty());
  EXPECT_FALSE(r.process.has_value()) << "no object-area magic, no process info";
  EXPECT_FALSE(r.histogram.has_value()) << "no D13 magic, no histogram";
}

TEST(ParseDatastore, CoreCountersOfSlots4To15AreFullSets) {
  std::vector<std::byte> b = Image();
  PutU64(b, 57984, 21);  // core 4, index 0
  PutU64(b, 58752, 22);  // core 5, index 0: 57984 + 768, README example
  PutU64(b, 58760, 23);  // core 5, index 1
  PutU64(b, 67184, 24);  // core 15, index 94: 57984 + 11*768 + 94*8
  PutU64(b, 67192, 99);  // core 15, entry 95: padding, never a counter
  std::vector<std::string> warnings;
  const DatastoreRecord r = Parse(b, &warnings);
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
  std::vector<std::string> warnings;
  const DatastoreRecord r = Parse(b, &warnings);
  EXPECT_EQ(r.format_version, 1);
  EXPECT_EQ(r.device_counters[12], 5u);
  EXPECT_EQ(r.device_counters[30], 77u);
  const NdsVersion v = UnpackVersionWord(r.device_counters[0]);
  EXPECT_EQ(v, (NdsVersion{2, 24, 7}));
}

TEST(ParseDatastore, ProcessInfoAndModelRecordsAtTheSimulatorsOffsets) {
  std::vector<std::byte> b = Image();
  PutBytes(b, 1248, "simo");
  PutU32(b, 1252, 1);
  b[1256] = std::byte{3};          // framework_type
  PutBytes(b, 1257, "short-tag");  // tag[32]
  b[1256 + 36] = std::byte{2};     // framework version 2.1.99
  b[1256 + 37] = std::byte{1};
  PutU32(b, 1256 + 40, 99);
  b[1256 + 52] = std::byte{2};  // runtime version 2.24.7
  b[1256 + 53] = std::byte{24};
  PutU32(b, 1256 + 56, 7);
  PutBytes(b, 1316, "llama2-7b/rank3");            // ext tag[256]
  PutU32(b, 1572, 2);                              // two model records
  PutU32(b, 1580, 10027);                          // record 0: model_id
  PutU32(b, 1584, 1);                              // model_node_id
  PutBytes(b, 1588, "nccom_neff");                 // name @8
  b[1580 + 264] = std::byte{0xab};                 // uuid[0]
  b[1580 + 280] = std::byte{3};                    // nc_index
  PutU64(b, 1580 + 284 + 16 * 1, 32500000);        // [device][TENSORS].total_size
  PutU32(b, 1580 + 284 + 16 * 1 + 8, 4);           // chunk_count
  PutU64(b, 1580 + 284 + 16 * 12 + 16 * 4, 2048);  // [host][MISC]
  PutU32(b, 1580 + 668, 10028);                    // record 1 starts 668 bytes later
  std::vector<std::string> warnings;
  const DatastoreRecord r = Parse(b, &warnings);
  ASSERT_TRUE(r.process.has_value());
  EXPECT_EQ(r.process->framework_type, 3);
  EXPECT_EQ(r.process->tag, "short-tag");
  EXPECT_EQ(r.process->long_tag, "llama2-7b/rank3");
  EXPECT_EQ(r.process->framework_version, (NdsVersion{2, 1, 99}));
  EXPECT_EQ(r.process->runtime_version, (NdsVersion{2, 24, 7}));
  EXPECT_EQ(r.Tag(), "llama2-7b/rank3");
  ASSERT_EQ(r.models.size(), 2u);
  EXPECT_EQ(r.models[0].model_id, 10027u);
  EXPECT_EQ(r.models[0].model_node_id, 1u);
  EXPECT_EQ(r.models[0].name, "nccom_neff");
  EXPECT_EQ(r.models[0].uuid[0], 0xab);
  EXPECT_EQ(r.models[0].nc_index, 3);
  EXPECT_EQ(r.models[0].memory[DatastoreModel::kLocationDevice][1].total_size, 32500000u);
  EXPECT_EQ(r.models[0].memory[DatastoreModel::kLocationDevice][1].chunk_count, 4u);
  EXPECT_EQ(r.models[0].memory[DatastoreModel::kLocationHost][4].total_size, 2048u);
  EXPECT_EQ(r.models[1].model_id, 10028u);
  EXPECT_THAT(warnings, IsEmpty());
}

TEST(ParseDatastore, TagFallsBackToShortTagThenPid) {
  std::vector<std::byte> b = Image();
  std::vector<std::string> warnings;
  EXPECT_EQ(Parse(b, &warnings).Tag(), "4711");
  PutBytes(b, 1248, "simo");
  PutU32(b, 1252, 1);
  PutBytes(b, 1257, "short");
  EXPECT_EQ(Parse(b, &warnings).Tag(), "short");
}

TEST(ParseDatastore, ModelCountBeyondTheAreaIsAWarning) {
  std::vector<std::byte> b = Image();
  PutBytes(b, 1248, "simo");
  PutU32(b, 1252, 1);
  PutU32(b, 1572, 65);  // at most 64 records fit
  std::vector<std::string> warnings;
  const DatastoreRecord r = Parse(b, &warnings);
  EXPECT_TRUE(r.models.empty());
  EXPECT_TRUE(r.process.has_value());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("ds/3.4711"));
}

TEST(ParseDatastore, HistogramOnlyWithItsMagic) {
  std::vector<std::byte> b = Image();
  PutU32(b, 67204, 3);  // bucket count without magic: ignored
  PutU64(b, 67208, 500);
  PutU64(b, 67216, 1000);
  PutU64(b, 67224, UINT64_MAX);
  PutU64(b, 67400, 5);                     // core 0, bucket 0
  PutU64(b, 67400 + (2 * 24 + 2) * 8, 9);  // core 2, bucket 2 (+Inf)
  std::vector<std::string> warnings;
  EXPECT_FALSE(Parse(b, &warnings).histogram.has_value());
  PutBytes(b, 67200, "hist");
  const DatastoreRecord r = Parse(b, &warnings);
  ASSERT_TRUE(r.histogram.has_value());
  EXPECT_EQ(r.histogram->num_buckets, 3);
  EXPECT_EQ(r.histogram->bounds_us[0], 500u);
  EXPECT_EQ(r.histogram->bounds_us[2], UINT64_MAX);
  EXPECT_EQ(r.histogram->counts[0][0], 5u);
  EXPECT_EQ(r.histogram->counts[2][2], 9u);
  EXPECT_THAT(warnings, IsEmpty());

  PutU64(b, 67216, 100);  // bounds no longer ascending
  std::vector<std::string> more;
  EXPECT_FALSE(Parse(b, &more).histogram.has_value());
  EXPECT_EQ(more.size(), 1u);
}

TEST(ParseDatastore, WrongSizeAndBadMagicNameTheSource) {
  std::vector<std::byte> b = Image();
  std::vector<std::string> warnings;
  std::vector<std::byte> small(b.begin(), b.begin() + 1000);
  absl::StatusOr<DatastoreRecord> r = ParseDatastore(small, 0, 1, "ds/0.1", &warnings);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("ds/0.1"));
  b[0] = std::byte{'x'};
  r = ParseDatastore(b, 0, 1, "ds/0.1", &warnings);
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
    warnings_.clear();
    absl::StatusOr<DatastoreRecord> r = ParseDatastore(std::as_bytes(std::span(memory_)), 2, 4242,
                                                       "/dev/neuron2 (pid 4242)", &warnings_);
    EXPECT_TRUE(r.ok()) << r.status();
    EXPECT_THAT(warnings_, IsEmpty());
    return r.ok() ? *std::move(r) : DatastoreRecord{};
  }

  std::vector<uint8_t> memory_ = std::vector<uint8_t>(nds::kSize);
  std::unique_ptr<sim::DatastoreWriter> writer_ =
      sim::DatastoreWriter::OverMemory(memory_, 2, 4242);
  std::vector<std::string> warnings_;
};

TEST_F(WriterParserTest, HeadersAloneParseAsAnIdleProcess) {
  const DatastoreRecord r = Read();
  EXPECT_EQ(r.device, 2);
  EXPECT_EQ(r.pid, 4242);
  EXPECT_EQ(r.format_version, 1);
  EXPECT_EQ(r.source, "/dev/neuron2 (pid 4242)");
  EXPECT_EQ(r.Core(0, nds::kTimeInUse), 0u);
  EXPECT_TRUE(r.models.empty());
  EXPECT_FALSE(r.histogram.has_value());
  EXPECT_FALSE(r.driver.has_value()) << "only the driver's process list fills it";
}

TEST_F(WriterParserTest, EveryPartTheWriterWritesIsRead) {
  sim::DatastoreWriter& w = Writer();
  ASSERT_TRUE(w.SetCoreCounter(1, nds::kInferCompleted, 99).ok());
  ASSERT_TRUE(w.SetCoreCounter(6, nds::kHwErrHbmUe, 3).ok());  // a full set beyond slot 3
  ASSERT_TRUE(w.SetDeviceCounter(12, 5).ok());
  w.SetProcessInfo("bert", {2, 24, 7}, 1);
  w.SetProcessTag("team-a/bert-large");
  sim::NdsModel model;
  model.model_id = 7;
  model.name = "bert";
  model.nc_index = 1;
  model.memory[0][1].total_size = 32500000;
  ASSERT_TRUE(w.AddModel(model).ok());
  const std::array<uint64_t, 2> bounds{1000, 10000};
  ASSERT_TRUE(w.InitHistogram(bounds).ok());
  w.ObserveLatency(1, 5000);

  const DatastoreRecord r = Read();
  EXPECT_EQ(r.Core(1, nds::kInferCompleted), 99u);
  EXPECT_EQ(r.Core(6, nds::kHwErrHbmUe), 3u);
  EXPECT_EQ(r.device_counters[12], 5u);
  ASSERT_TRUE(r.process.has_value());
  EXPECT_EQ(r.process->tag, "bert");
  EXPECT_EQ(r.process->framework_type, 1);
  EXPECT_EQ(r.Tag(), "team-a/bert-large");
  EXPECT_EQ(r.process->runtime_version, (NdsVersion{2, 24, 7}));
  EXPECT_EQ(UnpackVersionWord(r.device_counters[nds::kRuntimeVersion]), (NdsVersion{2, 24, 7}));
  ASSERT_EQ(r.models.size(), 1u);
  EXPECT_EQ(r.models[0].model_id, 7u);
  EXPECT_EQ(r.models[0].name, "bert");
  EXPECT_EQ(r.models[0].nc_index, 1);
  EXPECT_EQ(r.models[0].memory[DatastoreModel::kLocationDevice][1].total_size, 32500000u);
  ASSERT_TRUE(r.histogram.has_value());
  EXPECT_EQ(r.histogram->num_buckets, 3);
  EXPECT_EQ(r.histogram->bounds_us[2], UINT64_MAX);
  EXPECT_EQ(r.histogram->counts[1][1], 1u) << "5000 us lands in the (1000, 10000] bucket";
}

// The runtime writes while the monitor reads (no lock): each read sees the counters as they are,
// and a removed model is gone at the next read.
TEST_F(WriterParserTest, EachReadSeesTheLiveValues) {
  sim::DatastoreWriter& w = Writer();
  ASSERT_TRUE(w.SetCoreCounter(0, nds::kTimeInUse, 5).ok());
  sim::NdsModel a{.model_id = 1, .name = "a"};
  sim::NdsModel b{.model_id = 2, .name = "b"};
  ASSERT_TRUE(w.AddModel(a).ok());
  ASSERT_TRUE(w.AddModel(b).ok());
  DatastoreRecord r = Read();
  EXPECT_EQ(r.Core(0, nds::kTimeInUse), 5u);
  ASSERT_EQ(r.models.size(), 2u);

  ASSERT_TRUE(w.AddCoreCounter(0, nds::kTimeInUse, 10).ok());
  ASSERT_TRUE(w.RemoveModel(1, 0).ok());
  r = Read();
  EXPECT_EQ(r.Core(0, nds::kTimeInUse), 15u);
  ASSERT_EQ(r.models.size(), 1u);
  EXPECT_EQ(r.models[0].name, "b");
}

// The driver zeroes a released slot before it gives it to another process: a monitor that maps
// it then must see "nothing live here" (an error it drops), never a record of zeros.
TEST_F(WriterParserTest, AZeroedSlotIsNoRecord) {
  ASSERT_TRUE(Writer().SetCoreCounter(0, nds::kTimeInUse, 5).ok());
  std::fill(memory_.begin(), memory_.end(), 0);
  std::vector<std::string> warnings;
  absl::StatusOr<DatastoreRecord> r = ParseDatastore(std::as_bytes(std::span(memory_)), 2, 4242,
                                                     "/dev/neuron2 (pid 4242)", &warnings);
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
