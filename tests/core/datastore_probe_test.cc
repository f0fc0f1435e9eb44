// The datastore reader's probe (core/sample/datastore_driver.cc) on a simulated node, judged by
// what the driver logs because of it (docs/architecture.md#noticing-runtimes): idle devices are
// never opened, a device some other process holds is looked at once, a runtime's datastore is
// held and read until it goes, a write-only (free-access) holder is no reason to look, and where
// holders cannot be seen the probe opens devices as before. This test process is the monitor,
// under the interposer (its ctest environment preloads it); runtimes and holders are programs
// under `neuron-sim exec`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "core/sample/datastore.h"
#include "tests/support/driver_log.h"
#include "tests/support/subprocess.h"
#include "tests/support/suite_node.h"

namespace neuron {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::neuron::testing::ReadFile;
using ::neuron::testing::WaitUntil;

// npid_attach (or npid_detach) records of `pid` in ROOT/dev/kmsg.
int DriverLines(const fs::path& kmsg, pid_t pid, const std::string& what = "npid_attach") {
  const std::vector<testing::KmsgRecord> lines = testing::DriverLinesOf(kmsg, pid);
  return static_cast<int>(std::count_if(lines.begin(), lines.end(), [&](const auto& r) {
    return r.text.find("neuron:" + what + ": ") != std::string::npos;
  }));
}

bool HasRecordOf(DatastoreReader& reader, pid_t pid) {
  const DatastoreScan scan = reader.ReadAll();
  return std::any_of(scan.records.begin(), scan.records.end(),
                     [pid](const DatastoreRecord& r) { return r.pid == pid; });
}

// A simulated inf2.24xlarge (six devices, two cores each) for the suite; each test uses its own
// devices and its own reader, probing every 100 ms.
class DatastoreProbeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    suite_ = new neuron::testing::SuiteNode("probe", "inf2.24xlarge", NEURON_SIM_BIN);
    node_ = &suite_->node();
    dir_ = &suite_->dir();
    ASSERT_TRUE(node_->ready()) << node_->Log();
  }
  static void TearDownTestSuite() { delete suite_; }

  std::unique_ptr<DatastoreReader> Reader(std::vector<int> devices) {
    auto reader = MakeDriverDatastoreReader(node_->paths(),
                                            {.devices = std::move(devices), .probe_period = 100ms});
    EXPECT_TRUE(reader->AwaitFirstProbe(10s));
    return reader;
  }
  // A program under the driver that holds `device` open (`mode` "O_RDONLY" or "O_WRONLY")
  // without a datastore, once it said so.
  static pid_t Holder(int device, const std::string& mode, const std::string& name) {
    const std::string script = "import os, signal\nos.open('" +
                               node_->paths().DevNeuron(device).string() + "', os." + mode +
                               ")\nprint('holding', flush=True)\nsignal.pause()\n";
    const pid_t pid = node_->StartUnderDriver({"python3", "-c", script}, name);
    EXPECT_TRUE(WaitUntil(
        [&] { return ReadFile(node_->logs() / (name + ".out")).find("holding") == 0; }, 30s))
        << ReadFile(node_->logs() / (name + ".err"));
    return pid;
  }
  static fs::path Kmsg() { return node_->paths().Kmsg(); }

  static inline neuron::testing::SuiteNode* suite_ = nullptr;
  static inline neuron::testing::TempDir* dir_ = nullptr;
  static inline neuron::testing::SimNode* node_ = nullptr;
};

TEST_F(DatastoreProbeTest, IdleDevicesAreNeverOpened) {
  auto reader = Reader({0, 1});
  const SourceState first = reader->State();
  EXPECT_TRUE(first.known);
  EXPECT_TRUE(first.up) << first.reason;
  EXPECT_TRUE(first.unread.empty());
  std::this_thread::sleep_for(1s);  // ten probes
  EXPECT_TRUE(reader->State().up);
  EXPECT_EQ(DriverLines(Kmsg(), ::getpid()), 0);
  EXPECT_EQ(DriverLines(Kmsg(), ::getpid(), "npid_detach"), 0);
}

// Device 2 (cores 4 and 5): the workload is noticed, read, and let go when it has gone; the
// agent's whole cost is one attach and one detach.
TEST_F(DatastoreProbeTest, ARuntimeIsNoticedHeldAndLetGo) {
  auto reader = Reader({2});
  const pid_t workload = node_->StartWorkload("4");
  ASSERT_GT(workload, 0);
  EXPECT_TRUE(WaitUntil([&] { return HasRecordOf(*reader, workload); }, 5s));
  EXPECT_EQ(DriverLines(Kmsg(), ::getpid()), 1);
  EXPECT_TRUE(reader->State().up);
  ASSERT_TRUE(neuron::testing::Stop(workload, 30s).has_value());
  EXPECT_TRUE(WaitUntil([&] { return DriverLines(Kmsg(), ::getpid(), "npid_detach") == 1; }, 5s));
  std::this_thread::sleep_for(500ms);
  EXPECT_FALSE(HasRecordOf(*reader, workload));
  EXPECT_EQ(DriverLines(Kmsg(), ::getpid()), 1);
}

// A process that holds device 3 without a datastore gets it looked at once (and held for the
// grace period, in case it is a runtime about to claim one); a free-access holder of device 4
// attaches nothing in the driver and is no reason to look.
TEST_F(DatastoreProbeTest, HoldersAreLookedAtOnceAndFreeAccessOnesNever) {
  const pid_t reader_holder = Holder(3, "O_RDONLY", "holder3");
  const pid_t free_holder = Holder(4, "O_WRONLY", "holder4");
  const int before = DriverLines(Kmsg(), ::getpid());
  auto reader = Reader({3, 4});
  std::this_thread::sleep_for(1500ms);  // fifteen probes
  EXPECT_EQ(DriverLines(Kmsg(), ::getpid()) - before, 1);
  const SourceState s = reader->State();
  EXPECT_TRUE(s.up);
  EXPECT_TRUE(s.unread.empty()) << s.unread.begin()->second;
  EXPECT_TRUE(reader->ReadAll().records.empty());
  neuron::testing::Stop(reader_holder, 10s);
  neuron::testing::Stop(free_holder, 10s);
}

// Without the class device's number the holders of a device cannot be found: the probe opens it
// every period as before (the driver logs each time), and stops once the number is back.
TEST_F(DatastoreProbeTest, WhereHoldersCannotBeSeenItOpensAsBefore) {
  const fs::path dev = node_->Device(5) / "dev";
  const fs::path aside = dir_->path() / "neuron5.dev";
  fs::rename(dev, aside);
  const int before = DriverLines(Kmsg(), ::getpid());
  auto reader = Reader({5});
  std::this_thread::sleep_for(1s);
  EXPECT_GE(DriverLines(Kmsg(), ::getpid()) - before, 3);
  EXPECT_TRUE(reader->State().up);
  fs::rename(aside, dev);
  std::this_thread::sleep_for(500ms);
  const int settled = DriverLines(Kmsg(), ::getpid());
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(DriverLines(Kmsg(), ::getpid()), settled);
}

// While the kernel log's open and close records are told to it and it holds nothing, the probe
// waits out quiet_probe_period: a runtime's start is noticed on ProbeSoon (the call its npid_attach
// record makes in the exporter), not by the clock. Holding the device, it is back on probe_period
// and lets go when the runtime has gone.
TEST_F(DatastoreProbeTest, WhileOpensAreLoggedARuntimeIsNoticedOnProbeSoon) {
  auto reader = MakeDriverDatastoreReader(
      node_->paths(),
      {.devices = {1}, .probe_period = 100ms, .quiet_probe_period = 1h, .opens_logged = true});
  ASSERT_TRUE(reader->AwaitFirstProbe(10s));  // it waits the quiet period from then on
  const pid_t workload = node_->StartWorkload("2");
  ASSERT_GT(workload, 0);
  std::this_thread::sleep_for(1s);  // ten periods
  EXPECT_FALSE(HasRecordOf(*reader, workload)) << "noticed by the clock while quiet";
  reader->ProbeSoon();
  EXPECT_TRUE(WaitUntil([&] { return HasRecordOf(*reader, workload); }, 5s));
  ASSERT_TRUE(neuron::testing::Stop(workload, 30s).has_value());
  EXPECT_TRUE(WaitUntil([&] { return DriverLines(Kmsg(), ::getpid(), "npid_detach") == 1; }, 5s))
      << "not let go on probe_period";
}

}  // namespace
}  // namespace neuron
