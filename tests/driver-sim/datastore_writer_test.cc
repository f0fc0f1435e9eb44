// The datastore's bytes at the offsets docs/driver-interface.md#datastore-layout and
// driver-sim/README.md give, read back raw from the memory (not through the writer): the driver's
// header and counters and the D15 extension, never a byte of the object area, which is the
// runtime's (libnrt-sim's records: tests/driver-sim/runtime/records_test.cc); and the
// writer's claim and release of its slot through the simulated driver
// (docs/driver-interface.md#abi-reading-datastore).
#include "driver-sim/driver/datastore_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/base/unique_fd.h"
#include "core/model/catalog.h"
#include "driver-sim/driver/sim_tree.h"
#include "gtest/gtest.h"
#include "tests/support/driver_abi_client.h"
#include "tests/support/process.h"
#include "tests/support/sim_driver_thread.h"
#include "tests/support/sim_testing.h"
#include "tests/support/temp_dir.h"

namespace neuron::sim {
namespace {

namespace fs = std::filesystem;

// A writer over zeroed memory, as the driver hands out a fresh slot.
class DatastoreWriterTest : public ::testing::Test {
 protected:
  void SetUp() override { writer_ = DatastoreWriter::OverMemory(memory_, 3, 4711); }

  std::vector<uint8_t> Bytes() const { return memory_; }
  uint64_t U64At(size_t off) const {
    const std::vector<uint8_t> b = Bytes();
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | b.at(off + i);  // little-endian
    return v;
  }
  uint32_t U32At(size_t off) const {
    const std::vector<uint8_t> b = Bytes();
    return b.at(off) | b.at(off + 1) << 8 | b.at(off + 2) << 16 | uint32_t{b.at(off + 3)} << 24;
  }

  std::vector<uint8_t> memory_ = std::vector<uint8_t>(nds::kSize, 0);
  std::unique_ptr<DatastoreWriter> writer_;
};

TEST_F(DatastoreWriterTest, HeadersAndIdentity) {
  EXPECT_EQ(writer_->device(), 3);
  EXPECT_EQ(writer_->pid(), 4711);
  const std::vector<uint8_t> b = Bytes();
  EXPECT_EQ(std::string(b.begin(), b.begin() + 4), std::string("nds\0", 4));
  EXPECT_EQ(U32At(4), 1u);      // format version
  EXPECT_EQ(U32At(70472), 0u);  // no EFA traffic until InitEfaTraffic
  // The object area [1248, 44588) is handed to the runtime untouched.
  const std::span<uint8_t> area = writer_->ObjectArea();
  EXPECT_EQ(area.data(), memory_.data() + 1248);
  EXPECT_EQ(area.size(), 44588u - 1248u);
  EXPECT_TRUE(std::all_of(b.begin() + 8 + 31 * 8 + 4 * 31 * 8, b.begin() + 55936,
                          [](uint8_t x) { return x == 0; }));
}

TEST_F(DatastoreWriterTest, CoreCountersAtDriverOffsets) {
  ASSERT_TRUE(writer_->SetCoreCounter(0, 1, 0x1122334455667788ull).ok());
  EXPECT_EQ(U64At(256 + 8), 0x1122334455667788ull);
  EXPECT_EQ(Bytes().at(264), 0x88);  // little-endian
  ASSERT_TRUE(writer_->SetCoreCounter(5, 0, 77).ok());
  EXPECT_EQ(U64At(57984 + 768), 77u);
  ASSERT_TRUE(writer_->SetCoreCounter(2, 40, 5).ok());
  EXPECT_EQ(U64At(55936 + 2 * 512 + 9 * 8), 5u);
  ASSERT_TRUE(writer_->SetCoreCounter(3, 30, 6).ok());
  EXPECT_EQ(U64At(256 + 3 * 248 + 30 * 8), 6u);
  ASSERT_TRUE(writer_->SetCoreCounter(1, 31, 9).ok());
  EXPECT_EQ(U64At(55936 + 512), 9u);
  ASSERT_TRUE(writer_->SetCoreCounter(15, 94, 8).ok());
  EXPECT_EQ(U64At(57984 + 11 * 768 + 94 * 8), 8u);

  ASSERT_TRUE(writer_->AddCoreCounter(5, 0, 3).ok());
  EXPECT_EQ(U64At(57984 + 768), 80u);
  EXPECT_EQ(*writer_->CoreCounter(5, 0), 80u);

  // Where the driver reads 0 there is nothing to write.
  const std::vector<uint8_t> before = Bytes();
  EXPECT_EQ(writer_->SetCoreCounter(16, 0, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(writer_->SetCoreCounter(4, 95, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(writer_->SetCoreCounter(0, 95, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(writer_->AddCoreCounter(-1, 0, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Bytes(), before);
}

TEST_F(DatastoreWriterTest, ConcurrentAddsAreNotLost) {
  auto adder = [&] {
    for (int i = 0; i < 10000; ++i) ASSERT_TRUE(writer_->AddCoreCounter(1, 28, 1).ok());
  };
  std::thread a(adder), b(adder);
  a.join();
  b.join();
  EXPECT_EQ(U64At(256 + 248 + 28 * 8), 20000u);
}

TEST_F(DatastoreWriterTest, DeviceCountersAndRuntimeVersion) {
  ASSERT_TRUE(writer_->SetDeviceCounter(12, 42).ok());
  EXPECT_EQ(U64At(8 + 12 * 8), 42u);
  ASSERT_TRUE(writer_->AddDeviceCounter(7, 4096).ok());
  ASSERT_TRUE(writer_->AddDeviceCounter(7, 4096).ok());
  EXPECT_EQ(U64At(8 + 7 * 8), 8192u);
  EXPECT_EQ(writer_->SetDeviceCounter(31, 1).code(), absl::StatusCode::kInvalidArgument);

  // RUNTIME_VERSION packed as build | minor << 32 | major << 40.
  writer_->SetRuntimeVersion(2, 21, 43);
  EXPECT_EQ(U64At(8), 43u | (21ull << 32) | (2ull << 40));
}

// Acquire claims the process's slot through its device fd (ACQUIRE_NEURON_DS, pid 0) and maps
// the driver's memory, so a monitor reading the PID's datastore sees what the writer wrote;
// Release (RELEASE_NEURON_DS) folds it into sysfs and frees the slot, which comes back zeroed.
class DatastoreWriterDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tree_ = neuron::testing::MakeSimTree(paths_.root(), "trn1.2xlarge", {.lnc = 1});
    ASSERT_NE(tree_, nullptr);
    spec_ = tree_->config().spec;
    driver_ = std::make_unique<neuron::testing::SimDriverThread>(tree_.get(), *spec_, 1);
    ASSERT_TRUE(driver_->status().ok()) << driver_->status();
  }
  std::optional<uint64_t> MonitorWord(size_t offset) const {
    return neuron::testing::ReadDatastoreWord(paths_.DevNeuron(0), ::getpid(), offset);
  }

  ::neuron::testing::TempDir tmp_{"ds_driver"};
  RootPaths paths_{tmp_.path()};
  const InstanceSpec* spec_ = nullptr;
  std::unique_ptr<SimTree> tree_;
  std::unique_ptr<neuron::testing::SimDriverThread> driver_;
};

TEST_F(DatastoreWriterDriverTest, AcquireMapsTheDriversSlotAndReleaseFoldsAndFreesIt) {
  UniqueFd fd(::open(paths_.DevNeuron(0).c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(fd.valid()) << std::strerror(errno);
  absl::StatusOr<std::unique_ptr<DatastoreWriter>> w =
      DatastoreWriter::Acquire(fd.get(), 0, ::getpid());
  ASSERT_TRUE(w.ok()) << w.status();
  std::optional<std::vector<uint8_t>> seen =
      neuron::testing::ReadDatastoreBytes(paths_.DevNeuron(0), ::getpid());
  ASSERT_TRUE(seen.has_value());
  ASSERT_EQ(seen->size(), nds::kSize);
  EXPECT_EQ(std::string(seen->begin(), seen->begin() + 4), std::string("nds\0", 4));
  ASSERT_TRUE((*w)->SetCoreCounter(1, nds::kModelLoadCount, 2).ok());
  EXPECT_EQ(MonitorWord(*nds::CoreCounterOffset(1, nds::kModelLoadCount)), 2u);

  // A monitor's mapping of the slot, kept across the release.
  const std::unique_ptr<neuron::testing::DatastoreView> view =
      neuron::testing::DatastoreView::Open(paths_.DevNeuron(0), ::getpid());
  ASSERT_NE(view, nullptr);
  (*w)->Release();
  (*w)->Release();  // idempotent
  // The slot is free: a monitor's ACQUIRE with the PID gets ENOENT.
  EXPECT_FALSE(MonitorWord(0).has_value());
  EXPECT_EQ(neuron::testing::ReadFile(tree_->OtherInfoDir(0, 1, "model_load_count") / "total"),
            "2\n");
  // Folded first, then the whole slot zeroed; the monitor's mapping stays valid and reads zeros.
  EXPECT_EQ(view->Bytes(), std::vector<uint8_t>(nds::kSize, 0));
  // The process's last close releases a slot it did not release itself.
  absl::StatusOr<std::unique_ptr<DatastoreWriter>> again =
      DatastoreWriter::Acquire(fd.get(), 0, ::getpid());
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_TRUE((*again)->SetCoreCounter(0, nds::kModelLoadCount, 5).ok());
  again->reset();  // unmaps without releasing, as a dying process's mappings go
  fd.Reset();      // the last close, which the driver answers by releasing the slot
  EXPECT_FALSE(MonitorWord(0).has_value());
  EXPECT_EQ(neuron::testing::ReadFile(tree_->OtherInfoDir(0, 0, "model_load_count") / "total"),
            "5\n");
}

TEST_F(DatastoreWriterDriverTest, AcquireNeedsANormalDeviceFd) {
  // An O_WRONLY fd is the driver's free-access mode: ACQUIRE_NEURON_DS is refused.
  const UniqueFd fd(::open(paths_.DevNeuron(0).c_str(), O_WRONLY | O_CLOEXEC));
  ASSERT_TRUE(fd.valid()) << std::strerror(errno);
  EXPECT_FALSE(DatastoreWriter::Acquire(fd.get(), 0, ::getpid()).ok());
  const UniqueFd plain(::open(tree_->OtherInfoDir(0, 0, "model_load_count").c_str(),
                              O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(plain.valid());
  EXPECT_FALSE(DatastoreWriter::Acquire(plain.get(), 0, ::getpid()).ok());  // not a device at all
}

}  // namespace
}  // namespace neuron::sim
