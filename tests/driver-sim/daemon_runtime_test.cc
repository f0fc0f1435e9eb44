// The node daemon's runtime side (docs/architecture.md#daemon-is-the-driver, #device-abi): it
// mirrors live datastore memory into sysfs, adds EFA traffic to the port counters, folds a
// process's counters into sysfs once when it releases its datastore (RELEASE_NEURON_DS, its last
// close of the device, or its death) and zeroes the slot, drives power from busy time, lists
// processes in `ctl status`, and writes printk records. The runtime is a real process attached
// through the simulated driver (a forked RuntimeProcess, or this test process); the daemon is the
// real neuron-sim binary. Expected values are written literally from
// docs/driver-interface.md#counter-semantics and driver-sim/README.md.

#include <fcntl.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <iterator>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "core/base/unique_fd.h"
#include "core/driver/datastore_layout.h"
#include "core/driver/sysfs_names.h"
#include "driver-sim/driver/ctl.h"
#include "driver-sim/driver/datastore_writer.h"
#include "driver-sim/driver/efa_traffic_layout.h"
#include "driver-sim/runtime/records.h"
#include "tests/driver-sim/runtime_process.h"
#include "tests/support/driver_abi_client.h"
#include "tests/support/process.h"
#include "tests/support/sim_node.h"
#include "tests/support/sim_testing.h"
#include "tests/support/temp_dir.h"

namespace neuron::sim {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using namespace ::neuron::testing;
using ::neuron::sim::testing::RuntimeProcess;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr auto kCeiling = 30s;

class DaemonRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = tmp_.path() / "root";
    fs::create_directories(root_);
    node_ = std::make_unique<SimNode>(SimNodeOptions{
        .sim_bin = NEURON_SIM_BIN, .root = root_, .logs = tmp_.path(), .on_stop = ExpectCleanExit});
  }
  void TearDown() override {
    runtimes_.clear();
    node_.reset();
  }

  // A runtime process attached to `device` with its datastore claimed; it lives until the test
  // ends (or kills it).
  RuntimeProcess* Runtime(int device) {
    std::unique_ptr<RuntimeProcess> p =
        RuntimeProcess::Start(RootPaths(root_).DevNeuron(device), device);
    if (!p) return nullptr;
    runtimes_.push_back(std::move(p));
    return runtimes_.back().get();
  }
  // `pid`'s datastore as a monitor finds it (nullopt: the driver has no slot for it).
  std::optional<std::vector<uint8_t>> Datastore(int device, pid_t pid) const {
    return ::neuron::testing::ReadDatastoreBytes(RootPaths(root_).DevNeuron(device), pid);
  }
  bool Gone(int device, pid_t pid) const { return !Datastore(device, pid).has_value(); }

  std::optional<uint64_t> U64(const fs::path& p) const { return ReadU64File(p); }
  bool Is(const fs::path& p, uint64_t v) const { return U64(p) == v; }
  fs::path Mem(int core, const std::string& rel) const {
    return node_->Core(0, core) / "stats/memory_usage/device_mem" / rel;
  }
  fs::path HostMem(const std::string& rel) const {
    return node_->Device(0) / "stats/memory_usage/host_mem" / rel;
  }
  fs::path Status(int core, const std::string& name) const {
    return node_->Core(0, core) / "stats/status" / name;
  }
  fs::path Other(int core, const std::string& name) const {
    return node_->Core(0, core) / "stats/other_info" / name;
  }

  // Positive evidence that the daemon has read `rt`'s datastore since now: a memory counter
  // changed now shows in sysfs (the mirror pass), so a check that something did not happen
  // after an earlier change is not vacuous.
  ::testing::AssertionResult MirrorPassAfterNow(RuntimeProcess* rt, uint64_t marker) {
    if (auto r = rt->SetCore(1, nds::kMemUsageCodeDevice, marker); !r) return r;
    if (!WaitUntil([&] { return Is(Mem(1, "model_code/total"), marker); }, kCeiling)) {
      return ::testing::AssertionFailure() << "no mirror pass showed " << marker;
    }
    return ::testing::AssertionSuccess();
  }
  // The OPEN BY column of `device` in `ctl status` ("-" for none; "" when the row is missing).
  std::string OpenBy(int device) const {
    const RunResult r = node_->Ctl({"status"});
    std::istringstream lines(r.out);
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream words(line);
      std::vector<std::string> w{std::istream_iterator<std::string>(words), {}};
      if (w.size() == 8 && w[0] == std::to_string(device) && w[3] == "yes") return w[7];
    }
    return "";
  }

  ::neuron::testing::TempDir tmp_{"dsrt_test"};
  fs::path root_;
  std::unique_ptr<SimNode> node_;
  std::vector<std::unique_ptr<RuntimeProcess>> runtimes_;
};

TEST_F(DaemonRuntimeTest, MirrorsMemoryLiveByCategoryAsIncAndDec) {
  ASSERT_TRUE(node_->Up("inf2.xlarge")) << node_->Log();
  RuntimeProcess* rt = Runtime(0);
  ASSERT_NE(rt, nullptr);
  ASSERT_TRUE(rt->SetCore(0, nds::kMemUsageTensorsDevice, 1000));
  ASSERT_TRUE(rt->SetCore(0, nds::kMemUsageCodeDevice, 500));
  ASSERT_TRUE(rt->SetCore(1, nds::kMemUsageMiscDevice, 300));
  ASSERT_TRUE(rt->SetDevice(nds::kMemUsageTensorsHost, 4096));
  ASSERT_TRUE(rt->SetDevice(nds::kMemUsageMiscHost, 64));

  // Memory is live in sysfs (docs/driver-interface.md#live-vs-exit), by category and in the core's
  // total.
  ASSERT_TRUE(WaitUntil([&] { return Is(Mem(1, "runtime_memory/total"), 300); }, kCeiling));
  EXPECT_TRUE(WaitUntil([&] { return Is(Mem(0, "total"), 1500); }, kCeiling));
  EXPECT_EQ(U64(Mem(0, "tensors/total")), 1000u);
  EXPECT_EQ(U64(Mem(0, "model_code/total")), 500u);
  EXPECT_EQ(U64(Mem(1, "total")), 300u);
  EXPECT_TRUE(WaitUntil([&] { return Is(HostMem("tensors/total"), 4096); }, kCeiling));
  EXPECT_TRUE(WaitUntil([&] { return Is(HostMem("application_memory/total"), 64); }, kCeiling));
  // The probe's driver memory stays (docs/driver-interface.md#post-load-values).
  EXPECT_EQ(U64(HostMem("driver_memory/total")), 4194304u);

  // A free is a dec: total falls, present is the size freed, peak keeps the high-water mark.
  ASSERT_TRUE(rt->SetCore(0, nds::kMemUsageTensorsDevice, 400));
  ASSERT_TRUE(WaitUntil([&] { return Is(Mem(0, "tensors/total"), 400); }, kCeiling));
  EXPECT_EQ(U64(Mem(0, "tensors/present")), 600u);
  EXPECT_EQ(U64(Mem(0, "tensors/peak")), 1000u);
}

TEST_F(DaemonRuntimeTest, FoldsOnceAndZeroesTheSlotWhenTheProcessIsKilled) {
  ASSERT_TRUE(node_->Up("inf2.xlarge")) << node_->Log();
  RuntimeProcess* rt = Runtime(0);
  ASSERT_NE(rt, nullptr);
  ASSERT_TRUE(rt->SetCore(0, nds::kMemUsageTensorsDevice, 1000));
  ASSERT_TRUE(WaitUntil([&] { return Is(Mem(0, "tensors/total"), 1000); }, kCeiling));
  ASSERT_TRUE(rt->SetCore(0, nds::kMemUsageTensorsDevice, 400));
  ASSERT_TRUE(rt->SetCore(1, nds::kMemUsageMiscDevice, 300));
  ASSERT_TRUE(rt->SetDevice(nds::kMemUsageTensorsHost, 4096));
  ASSERT_TRUE(WaitUntil([&] { return Is(HostMem("tensors/total"), 4096); }, kCeiling));
  ASSERT_TRUE(WaitUntil([&] { return Is(Mem(0, "tensors/total"), 400); }, kCeiling));

  // Runtime counters reach sysfs only when the process goes (D1 not offered,
  // driver-sim/README.md#deviations).
  ASSERT_TRUE(rt->SetCore(0, nds::kInferCompleted, 7));
  ASSERT_TRUE(rt->SetCore(0, nds::kInferenceCount, 7));
  ASSERT_TRUE(rt->SetCore(0, nds::kTimeInUse, 123456));
  ASSERT_TRUE(rt->SetCore(0, nds::kMacCount, 1000));
  ASSERT_TRUE(rt->SetCore(0, nds::kModelLoadCount, 2));
  ASSERT_TRUE(rt->SetCore(1, nds::kHwErrHbmUe, 1));
  ASSERT_TRUE(MirrorPassAfterNow(rt, 4242));  // the daemon has read these counters
  EXPECT_EQ(U64(Status(0, "success/total")), 0u);
  EXPECT_EQ(U64(Other(0, "nc_time_in_use/total")), 0u);

  // A monitor's mapping of the slot outlives the process
  // (docs/driver-interface.md#abi-reading-datastore).
  const std::unique_ptr<::neuron::testing::DatastoreView> view =
      ::neuron::testing::DatastoreView::Open(RootPaths(root_).DevNeuron(0), rt->pid());
  ASSERT_NE(view, nullptr);
  rt->Kill();  // left a zombie: the driver learns of the death from the connection's end
  ASSERT_TRUE(WaitUntil([&] { return Gone(0, rt->pid()); }, kCeiling))
      << "the datastore of a killed process stays\n"
      << node_->Log();
  // Folded: each counter one inc of the process's total (present = that total).
  EXPECT_EQ(U64(Status(0, "success/total")), 7u);
  EXPECT_EQ(U64(Status(0, "success/present")), 7u);
  EXPECT_EQ(U64(Status(1, "hw_hbm_ue_error/total")), 1u);
  EXPECT_EQ(U64(Status(0, "hw_hbm_ue_error/total")), 0u);
  EXPECT_EQ(U64(Other(0, "inference_count/total")), 7u);
  EXPECT_EQ(U64(Other(0, "nc_time_in_use/total")), 123456u);
  EXPECT_EQ(U64(Other(0, "flop_count/total")), 2000u);  // 2 x MAC_COUNT
  EXPECT_EQ(U64(Other(0, "model_load_count/total")), 2u);
  EXPECT_EQ(U64(Other(1, "nc_time_in_use/total")), 0u);
  // Nothing leaked: memory back to the post-probe values, the last free as present.
  EXPECT_EQ(U64(Mem(0, "total")), 0u);
  EXPECT_EQ(U64(Mem(1, "total")), 0u);
  EXPECT_EQ(U64(Mem(0, "tensors/total")), 0u);
  EXPECT_EQ(U64(Mem(0, "tensors/present")), 400u);
  EXPECT_EQ(U64(Mem(0, "tensors/peak")), 1000u);
  EXPECT_EQ(U64(HostMem("tensors/total")), 0u);
  EXPECT_EQ(U64(HostMem("driver_memory/total")), 4194304u);
  // Folded before the driver zeroed the whole slot, which the monitor now reads.
  EXPECT_EQ(view->Bytes(), std::vector<uint8_t>(nds::kSize, 0));

  // Once: later passes add nothing. A new runtime's memory mirrored is a later pass.
  RuntimeProcess* next = Runtime(0);
  ASSERT_NE(next, nullptr);
  ASSERT_TRUE(MirrorPassAfterNow(next, 4343));
  EXPECT_EQ(U64(Status(0, "success/total")), 7u);
  EXPECT_EQ(U64(Other(0, "nc_time_in_use/total")), 123456u);
}

TEST_F(DaemonRuntimeTest, ReleasedDatastoreOfALiveProcessIsFoldedOnceAndFreed) {
  ASSERT_TRUE(node_->Up("trn1.2xlarge")) << node_->Log();
  RuntimeProcess* rt = Runtime(0);
  ASSERT_NE(rt, nullptr);
  ASSERT_TRUE(rt->SetCore(1, nds::kInferCompleted, 40));
  ASSERT_TRUE(rt->SetCore(1, nds::kTimeInUse, 5000));
  ASSERT_TRUE(rt->SetCore(1, nds::kMemUsageScratchpadDevice, 1 << 20));
  ASSERT_TRUE(
      WaitUntil([&] { return Is(Mem(1, "model_shared_scratchpad/total"), 1 << 20); }, kCeiling));
  // Sysfs plus the live datastore, as a consumer adds them, before the release...
  const uint64_t before = *U64(Status(1, "success/total")) + 40;
  // ...then nrt_close releases the datastore (ioctl 72); the process lives on, device open.
  ASSERT_TRUE(rt->Release());
  ASSERT_TRUE(WaitUntil([&] { return Gone(0, rt->pid()); }, kCeiling)) << node_->Log();
  EXPECT_EQ(kill(rt->pid(), 0), 0);
  EXPECT_EQ(U64(Status(1, "success/total")), before);
  EXPECT_EQ(U64(Other(1, "nc_time_in_use/total")), 5000u);
  EXPECT_EQ(U64(Mem(1, "model_shared_scratchpad/total")), 0u);
  // Once: neither later passes nor the process's last close add anything. The daemon has
  // handled the close once `ctl status` no longer lists the process on the device, and a later
  // pass once another runtime's memory shows.
  const std::string pid = std::to_string(rt->pid());
  ASSERT_THAT(OpenBy(0), HasSubstr(pid));
  ASSERT_TRUE(rt->CloseDevice());
  EXPECT_TRUE(WaitUntil([&] { return OpenBy(0).find(pid) == std::string::npos; }, kCeiling))
      << OpenBy(0);
  RuntimeProcess* next = Runtime(0);
  ASSERT_NE(next, nullptr);
  ASSERT_TRUE(MirrorPassAfterNow(next, 4343));
  EXPECT_EQ(U64(Status(1, "success/total")), before);
  EXPECT_EQ(U64(Other(1, "nc_time_in_use/total")), 5000u);
}

// A process that never calls nrt_close but closes the device (its last fd and mapping) is
// released by the driver's release of that open.
TEST_F(DaemonRuntimeTest, LastCloseOfTheDeviceFoldsTheDatastore) {
  ASSERT_TRUE(node_->Up("trn1.2xlarge")) << node_->Log();
  RuntimeProcess* rt = Runtime(0);
  ASSERT_NE(rt, nullptr);
  ASSERT_TRUE(rt->SetCore(0, nds::kInferCompleted, 11));
  ASSERT_TRUE(rt->SetCore(0, nds::kMemUsageTensorsDevice, 2048));
  ASSERT_TRUE(WaitUntil([&] { return Is(Mem(0, "tensors/total"), 2048); }, kCeiling));
  ASSERT_TRUE(rt->CloseDevice());
  ASSERT_TRUE(WaitUntil([&] { return Gone(0, rt->pid()); }, kCeiling)) << node_->Log();
  EXPECT_EQ(kill(rt->pid(), 0), 0);
  EXPECT_EQ(U64(Status(0, "success/total")), 11u);
  EXPECT_EQ(U64(Mem(0, "tensors/total")), 0u);
}

// trn2 at LNC 2: counter sets are per physical core, so set i is mirrored and folded into
// neuron_core<i> whatever the LNC, as the driver does (driver-sim/README.md "Counter sets are
// physical"). The runtime writes logical core 1's figures into sets 2 and 3 as libnrt-sim does.
TEST_F(DaemonRuntimeTest, Lnc2MirrorsAndFoldsEachCounterSetIntoItsPhysicalCoreAndEfaTraffic) {
  ASSERT_TRUE(node_->Up("trn2.48xlarge")) << node_->Log();
  RuntimeProcess* rt = Runtime(3);
  ASSERT_NE(rt, nullptr);
  ASSERT_TRUE(rt->SetCore(2, nds::kMemUsageTensorsDevice, 501));
  ASSERT_TRUE(rt->SetCore(3, nds::kMemUsageTensorsDevice, 500));
  auto core = [&](int c) { return node_->Core(3, c) / "stats"; };
  // The two physical cores are two files written one after the other: wait for both.
  ASSERT_TRUE(WaitUntil(
      [&] {
        return Is(core(2) / "memory_usage/device_mem/tensors/total", 501) &&
               Is(core(3) / "memory_usage/device_mem/tensors/total", 500);
      },
      kCeiling));
  EXPECT_EQ(U64(core(0) / "memory_usage/device_mem/tensors/total"), 0u);

  // EFA traffic extension: EFA 2 in catalog order moved bytes and packets.
  const uint64_t tx = 1 << 30, pkts = 131072;
  ASSERT_TRUE(rt->InitEfa(4));
  ASSERT_TRUE(rt->AddEfa(2, nds::kEfaTxBytes, tx));
  ASSERT_TRUE(rt->AddEfa(2, nds::kEfaTxPkts, pkts));
  ASSERT_TRUE(rt->AddEfa(2, nds::kEfaRxBytes, tx));
  // Which name is EFA 2 is the catalog's business; exactly one EFA carries the traffic.
  auto carrying = [&] {
    int count = 0;
    for (const auto& e : fs::directory_iterator(root_ / "sys/class/infiniband")) {
      const fs::path c = e.path() / "ports/1/hw_counters";
      if (ReadU64File(c / "tx_bytes") == tx && ReadU64File(c / "tx_pkts") == pkts &&
          ReadU64File(c / "rx_bytes") == tx && ReadU64File(c / "rx_pkts") == 0u) {
        ++count;
      }
    }
    return count;
  };
  EXPECT_TRUE(WaitUntil([&] { return carrying() == 1; }, kCeiling));

  ASSERT_TRUE(rt->SetCore(2, nds::kTimeInUse, 777));
  ASSERT_TRUE(rt->SetCore(3, nds::kTimeInUse, 777));
  ASSERT_TRUE(rt->SetCore(2, nds::kInferCompleted, 3));
  // An odd set alone (the second physical core of logical core 2) folds into its own core.
  ASSERT_TRUE(rt->SetCore(5, nds::kInferCompleted, 4));
  ASSERT_TRUE(rt->SetCore(5, nds::kTimeInUse, 9));
  rt->Kill();
  ASSERT_TRUE(WaitUntil([&] { return Gone(3, rt->pid()); }, kCeiling)) << node_->Log();
  EXPECT_EQ(U64(core(2) / "other_info/nc_time_in_use/total"), 777u);
  EXPECT_EQ(U64(core(3) / "other_info/nc_time_in_use/total"), 777u);
  EXPECT_EQ(U64(core(2) / "status/success/total"), 3u);
  EXPECT_EQ(U64(core(3) / "status/success/total"), 0u);
  EXPECT_EQ(U64(core(5) / "status/success/total"), 4u);
  EXPECT_EQ(U64(core(5) / "other_info/nc_time_in_use/total"), 9u);
  EXPECT_EQ(U64(core(4) / "status/success/total"), 0u);
  EXPECT_EQ(U64(core(4) / "other_info/nc_time_in_use/total"), 0u);
  EXPECT_EQ(U64(core(2) / "memory_usage/device_mem/tensors/total"), 0u);
  EXPECT_EQ(U64(core(3) / "memory_usage/device_mem/tensors/total"), 0u);
  EXPECT_EQ(carrying(), 1);  // port counters are monotonic: traffic stays counted
}

// A new daemon is a freshly loaded driver: the runtimes of the previous one are not its
// processes, so nothing of theirs is mirrored or folded into the new tree.
TEST_F(DaemonRuntimeTest, RestartedDaemonForgetsThePreviousDriversRuntimes) {
  ASSERT_TRUE(node_->Up("inf2.xlarge")) << node_->Log();
  RuntimeProcess* old_rt = Runtime(0);
  ASSERT_NE(old_rt, nullptr);
  ASSERT_TRUE(old_rt->SetCore(0, nds::kInferCompleted, 9));
  ASSERT_TRUE(old_rt->SetCore(0, nds::kMemUsageTensorsDevice, 111));
  ASSERT_TRUE(WaitUntil([&] { return Is(Mem(0, "tensors/total"), 111); }, kCeiling));

  node_.reset();  // SIGTERM: the daemon removes its tree; the old runtime lives on
  node_ = std::make_unique<SimNode>(SimNodeOptions{
      .sim_bin = NEURON_SIM_BIN, .root = root_, .logs = tmp_.path(), .on_stop = ExpectCleanExit});
  ASSERT_TRUE(node_->Up("inf2.xlarge")) << node_->Log();
  RuntimeProcess* live = Runtime(0);
  ASSERT_NE(live, nullptr);
  ASSERT_TRUE(old_rt->SetCore(0, nds::kMemUsageTensorsDevice, 333));
  ASSERT_TRUE(live->SetCore(0, nds::kMemUsageTensorsDevice, 222));
  EXPECT_TRUE(WaitUntil([&] { return Is(Mem(0, "tensors/total"), 222); }, kCeiling));
  EXPECT_TRUE(Gone(0, old_rt->pid()));
  // The old runtime's nrt_close finds no driver that knows it: nothing is folded.
  (void)old_rt->Release();
  ASSERT_TRUE(MirrorPassAfterNow(live, 4444));  // the daemon has had passes since
  EXPECT_EQ(U64(Status(0, "success/total")), 0u);
  EXPECT_EQ(U64(Mem(0, "tensors/total")), 222u);
}

TEST_F(DaemonRuntimeTest, PowerFollowsBusyTime) {
  ASSERT_TRUE(node_->Up("inf2.xlarge", {"--power-period-ms", "1000"})) << node_->Log();
  const fs::path power = node_->Device(0) / "stats/power/utilization";
  auto avg = [&]() -> std::optional<double> {
    const std::string text = ReadFile(power);
    if (!text.starts_with("POWER_STATUS_VALID,")) return std::nullopt;
    return std::stod(text.substr(text.rfind(',') + 1));
  };
  // Idle: the modelled idle level of Inferentia2 (11 % plus a small offset).
  ASSERT_TRUE(WaitUntil([&] { return avg().has_value(); }, kCeiling)) << ReadFile(power);
  EXPECT_LT(*avg(), 20.0);

  RuntimeProcess* rt = Runtime(0);
  ASSERT_NE(rt, nullptr);
  // Both cores busy all the time: busy microseconds grow with the wall clock.
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    const auto start = std::chrono::steady_clock::now();
    while (!stop) {
      const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::steady_clock::now() - start)
                          .count();
      (void)rt->SetCore(0, nds::kTimeInUse, static_cast<uint64_t>(us));
      (void)rt->SetCore(1, nds::kTimeInUse, static_cast<uint64_t>(us));
      std::this_thread::sleep_for(10ms);
    }
  });
  const bool loaded = WaitUntil([&] { return avg().value_or(0) > 80.0; }, kCeiling);
  stop = true;
  busy.join();
  EXPECT_TRUE(loaded) << ReadFile(power);
  EXPECT_LE(avg().value_or(100), 91.0);
}

TEST_F(DaemonRuntimeTest, StatusListsProcessesWithTagAndCores) {
  ASSERT_TRUE(node_->Up("trn1.2xlarge")) << node_->Log();
  // This test process is the runtime: attached to device 0, datastore claimed, core 1 locked.
  const pid_t self = getpid();
  const UniqueFd dev(open(RootPaths(root_).DevNeuron(0).c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(dev.valid()) << std::strerror(errno);
  absl::StatusOr<std::unique_ptr<DatastoreWriter>> ds =
      DatastoreWriter::Acquire(dev.get(), 0, self);
  ASSERT_TRUE(ds.ok()) << ds.status();
  // The tag as libnrt-sim keeps it (driver-sim/runtime/records.h): the status page reads it with
  // libnrt-sim's own reader.
  nrt::records::Writer records((*ds)->ObjectArea());
  records.SetProcessInfoExt("llama-worker-0");
  ASSERT_TRUE((*ds)->SetCoreCounter(1, nds::kMemUsageTensorsDevice, 4096).ok());
  const fs::path lock = root_ / "run/neuron/cores/1";
  const UniqueFd fd(open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  ASSERT_TRUE(fd.valid());
  ASSERT_EQ(flock(fd.get(), LOCK_EX | LOCK_NB), 0);
  ASSERT_TRUE(WaitUntil([&] { return Is(Mem(1, "tensors/total"), 4096); }, kCeiling));

  const fs::path out = tmp_.path() / "status.out";
  const pid_t ctl = Spawn({NEURON_SIM_BIN, "ctl", "--root", root_.string(), "status"}, out,
                          tmp_.path() / "status.err");
  ASSERT_EQ(WaitExit(ctl, kCeiling), 0);
  const std::string status = ReadFile(out);
  EXPECT_THAT(status, HasSubstr("llama-worker-0"));
  bool row = false;
  std::istringstream lines(status);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("llama-worker-0") == std::string::npos) continue;
    row = true;
    EXPECT_THAT(line,
                MatchesRegex(fmt::format(" *0 +{} +llama-worker-0 +1 +1 +4096 +running", self)))
        << status;
  }
  EXPECT_TRUE(row) << status;
  (*ds)->Release();  // the lock and the device go with their fds at the end
}

TEST_F(DaemonRuntimeTest, PrintkAppendsToKmsgVerbatim) {
  ASSERT_TRUE(node_->Up("inf2.xlarge")) << node_->Log();
  const RootPaths paths(root_);
  const std::string text =
      "nrt: NEURON_HW_ERR=HBM_UNCORRECTABLE_ERROR instance-id=i-0 nd-id=0 nc-id=1 "
      "action=TERMINATE_INSTANCE";
  ASSERT_TRUE(SendPrintk(paths, 3, text).ok());
  ASSERT_TRUE(SendPrintk(paths, 6, "two  spaces\tand a tab").ok());
  const std::string kmsg = ReadFile(root_ / "dev/kmsg");
  // "<prio>,<seq>,<usec>,-;<text>" (D9, driver-sim/README.md#deviations); KERN_ERR is 3; a tab is
  // escaped as the kernel does.
  EXPECT_THAT(kmsg, MatchesRegex(fmt::format("(.|\n)*\n3,[0-9]+,[0-9]+,-;{}\n(.|\n)*", text)));
  EXPECT_THAT(kmsg, HasSubstr(",-;two  spaces\\x09and a tab\n"));
  EXPECT_THAT(kmsg, MatchesRegex("(.|\n)*\n6,[0-9]+,[0-9]+,-;two (.|\n)*"));

  // What the driver refuses: more than 511 bytes; what one line cannot carry: a newline.
  EXPECT_TRUE(absl::IsInvalidArgument(SendPrintk(paths, 3, std::string(512, 'x'))));
  EXPECT_TRUE(SendPrintk(paths, 3, std::string(511, 'x')).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(SendPrintk(paths, 3, "a\nb")));
  EXPECT_TRUE(absl::IsInvalidArgument(SendPrintk(paths, 8, "level")));
}

// The printk request line: everything after "-- " is the text, verbatim
// (driver-sim/README.md#ctl-protocol).
TEST(CtlPrintkTest, RequestLineCarriesTheTextVerbatim) {
  absl::StatusOr<CtlRequest> r = ParseCtlLine("printk --level 4 --  two  spaces\tand a tab");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->command, "printk");
  EXPECT_EQ(r->level, 4);
  EXPECT_EQ(r->text, " two  spaces\tand a tab");
  absl::StatusOr<CtlRequest> again = ParseCtlLine(FormatCtlRequest(*r));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *r);
  // A CRLF client's carriage return is not part of the text; "--" inside the text is text.
  absl::StatusOr<CtlRequest> crlf = ParseCtlLine("printk -- a -- b\r");
  ASSERT_TRUE(crlf.ok()) << crlf.status();
  EXPECT_EQ(crlf->text, "a -- b");
  EXPECT_EQ(crlf->level, 3);  // KERN_ERR, as the driver's ioctl prints

  // From the command line: the words after "--" joined by single spaces.
  absl::StatusOr<CtlRequest> words = ParseCtlArgs({"printk", "--", "nrt:", "NEURON_HW_ERR=X"});
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_EQ(words->text, "nrt: NEURON_HW_ERR=X");

  for (const char* bad :
       {"printk", "printk hello", "printk --", "printk --level 8 -- x", "printk --device 1 -- x"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(ParseCtlLine(bad).status())) << bad;
  }
  EXPECT_TRUE(
      absl::IsInvalidArgument(ParseCtlArgs({"printk", "--", std::string(512, 'x')}).status()));
}

}  // namespace
}  // namespace neuron::sim
