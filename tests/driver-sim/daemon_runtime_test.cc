// The node daemon's runtime side (DESIGN decision 2): it mirrors live datastore memory into sysfs,
// adds EFA traffic to the port counters, folds a finished process's counters into sysfs once and
// removes its datastore, drives power from busy time, lists processes in `ctl status`, and
// writes printk records. The runtime is played by a DatastoreWriter on behalf of a child process
// the test controls; the daemon is the real neuron-sim binary. Expected values are written
// literally from DRIVER-INTERFACE.md §3 and driver-sim/README.md.

#include <fcntl.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <thread>

#include "core/datastore_layout.h"
#include "core/sysfs_names.h"
#include "driver-sim/ctl.h"
#include "driver-sim/datastore_writer.h"
#include "tests/driver-sim/sim_process.h"
#include "tests/support/temp_dir.h"

namespace neuron::sim {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using namespace ::neuron::sim::testing;

constexpr auto kCeiling = 30s;

class DaemonRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = tmp_.path() / "root";
    fs::create_directories(root_);
    node_ = std::make_unique<SimNode>(NEURON_SIM_BIN, root_, tmp_.path());
  }
  void TearDown() override {
    for (pid_t pid : children_) {
      kill(pid, SIGKILL);
      WaitExit(pid, 10s);
    }
    node_.reset();
  }

  // A process that stands for a runtime: the daemon watches its PID.
  pid_t Child() {
    const pid_t pid = Spawn({"sleep", "600"}, tmp_.path() / "child.out", tmp_.path() / "child.err");
    children_.push_back(pid);
    return pid;
  }
  void KillChild(pid_t pid) { kill(pid, SIGKILL); }  // left a zombie: the daemon must see it

  std::unique_ptr<DatastoreWriter> Datastore(int device, pid_t pid) {
    absl::StatusOr<std::unique_ptr<DatastoreWriter>> w =
        DatastoreWriter::Create(RootPaths(root_), device, pid);
    EXPECT_TRUE(w.ok()) << w.status();
    return w.ok() ? std::move(*w) : nullptr;
  }

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

  ::neuron::testing::TempDir tmp_{"dsrt_test"};
  fs::path root_;
  std::unique_ptr<SimNode> node_;
  std::vector<pid_t> children_;
};

TEST_F(DaemonRuntimeTest, MirrorsMemoryLiveAndFoldsOnceWhenTheProcessIsKilled) {
  node_->Up("inf2.xlarge");
  const pid_t pid = Child();
  auto ds = Datastore(0, pid);
  ASSERT_NE(ds, nullptr);
  ASSERT_TRUE(ds->SetCoreCounter(0, nds::kMemUsageTensorsDevice, 1000).ok());
  ASSERT_TRUE(ds->SetCoreCounter(0, nds::kMemUsageCodeDevice, 500).ok());
  ASSERT_TRUE(ds->SetCoreCounter(1, nds::kMemUsageMiscDevice, 300).ok());
  ASSERT_TRUE(ds->SetDeviceCounter(nds::kMemUsageTensorsHost, 4096).ok());
  ASSERT_TRUE(ds->SetDeviceCounter(nds::kMemUsageMiscHost, 64).ok());

  // Memory is live in sysfs (DRIVER-INTERFACE §3.2), by category and in the core's total.
  ASSERT_TRUE(WaitUntil([&] { return Is(Mem(1, "runtime_memory/total"), 300); }, kCeiling));
  EXPECT_TRUE(WaitUntil([&] { return Is(Mem(0, "total"), 1500); }, kCeiling));
  EXPECT_EQ(U64(Mem(0, "tensors/total")), 1000u);
  EXPECT_EQ(U64(Mem(0, "model_code/total")), 500u);
  EXPECT_EQ(U64(Mem(1, "total")), 300u);
  EXPECT_TRUE(WaitUntil([&] { return Is(HostMem("tensors/total"), 4096); }, kCeiling));
  EXPECT_TRUE(WaitUntil([&] { return Is(HostMem("application_memory/total"), 64); }, kCeiling));
  // The probe's driver memory stays (§3.3).
  EXPECT_EQ(U64(HostMem("driver_memory/total")), 4194304u);

  // A free is a dec: total falls, present is the size freed, peak keeps the high-water mark.
  ASSERT_TRUE(ds->SetCoreCounter(0, nds::kMemUsageTensorsDevice, 400).ok());
  ASSERT_TRUE(WaitUntil([&] { return Is(Mem(0, "tensors/total"), 400); }, kCeiling));
  EXPECT_EQ(U64(Mem(0, "tensors/present")), 600u);
  EXPECT_EQ(U64(Mem(0, "tensors/peak")), 1000u);

  // Runtime counters reach sysfs only when the process goes (D1 not offered).
  ASSERT_TRUE(ds->SetCoreCounter(0, nds::kInferCompleted, 7).ok());
  ASSERT_TRUE(ds->SetCoreCounter(0, nds::kInferenceCount, 7).ok());
  ASSERT_TRUE(ds->SetCoreCounter(0, nds::kTimeInUse, 123456).ok());
  ASSERT_TRUE(ds->SetCoreCounter(0, nds::kMacCount, 1000).ok());
  ASSERT_TRUE(ds->SetCoreCounter(0, nds::kModelLoadCount, 2).ok());
  ASSERT_TRUE(ds->SetCoreCounter(1, nds::kHwErrHbmUe, 1).ok());
  std::this_thread::sleep_for(300ms);  // several daemon passes
  EXPECT_EQ(U64(Status(0, "success/total")), 0u);
  EXPECT_EQ(U64(Other(0, "nc_time_in_use/total")), 0u);

  KillChild(pid);
  const fs::path file = root_ / "run/neuron/ds" / fmt::format("0.{}", pid);
  ASSERT_TRUE(WaitUntil([&] { return !fs::exists(file); }, kCeiling))
      << "the datastore of a killed process stays\n"
      << node_->DaemonLog();
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
  EXPECT_EQ(U64(HostMem("application_memory/total")), 0u);
  EXPECT_EQ(U64(HostMem("driver_memory/total")), 4194304u);

  // Once: later passes add nothing.
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(U64(Status(0, "success/total")), 7u);
  EXPECT_EQ(U64(Other(0, "nc_time_in_use/total")), 123456u);
}

TEST_F(DaemonRuntimeTest, ReleasedDatastoreOfALiveProcessIsFoldedOnceAndRemoved) {
  node_->Up("trn1.2xlarge");
  const pid_t pid = Child();
  auto ds = Datastore(0, pid);
  ASSERT_NE(ds, nullptr);
  ASSERT_TRUE(ds->SetCoreCounter(1, nds::kInferCompleted, 40).ok());
  ASSERT_TRUE(ds->SetCoreCounter(1, nds::kTimeInUse, 5000).ok());
  ASSERT_TRUE(ds->SetCoreCounter(1, nds::kMemUsageScratchpadDevice, 1 << 20).ok());
  ASSERT_TRUE(
      WaitUntil([&] { return Is(Mem(1, "model_shared_scratchpad/total"), 1 << 20); }, kCeiling));
  // Sysfs plus the live datastore, as a consumer adds them, before the release...
  const uint64_t before = *U64(Status(1, "success/total")) + 40;
  // ...then nrt_close sets the released flag (ioctl 72 on hardware); the process lives on.
  const int fd = open(ds->path().c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  const uint32_t one = 1;
  ASSERT_EQ(pwrite(fd, &one, sizeof(one), nds::kReleasedOffset), 4);
  close(fd);
  ASSERT_TRUE(WaitUntil([&] { return !fs::exists(ds->path()); }, kCeiling)) << node_->DaemonLog();
  EXPECT_EQ(U64(Status(1, "success/total")), before);
  EXPECT_EQ(U64(Other(1, "nc_time_in_use/total")), 5000u);
  EXPECT_EQ(U64(Mem(1, "model_shared_scratchpad/total")), 0u);
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(U64(Status(1, "success/total")), before);
}

// trn2 at LNC 2: logical slot k is physical cores 2k and 2k+1 (driver-sim/README.md).
TEST_F(DaemonRuntimeTest, Lnc2SplitsMemoryAndFoldsBusyTimeIntoBothCoresAndEfaTraffic) {
  node_->Up("trn2.48xlarge");
  const pid_t pid = Child();
  auto ds = Datastore(3, pid);
  ASSERT_NE(ds, nullptr);
  ASSERT_TRUE(ds->SetCoreCounter(1, nds::kMemUsageTensorsDevice, 1001).ok());
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
  const int fd = open(ds->path().c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  const uint32_t n = 4;
  ASSERT_EQ(pwrite(fd, &n, 4, nds::kEfaTrafficOffset + 4), 4);
  const uint64_t tx = 1 << 30, pkts = 131072;
  ASSERT_EQ(pwrite(fd, &tx, 8, nds::EfaTrafficFieldOffset(2, nds::kEfaTxBytes)), 8);
  ASSERT_EQ(pwrite(fd, &pkts, 8, nds::EfaTrafficFieldOffset(2, nds::kEfaTxPkts)), 8);
  ASSERT_EQ(pwrite(fd, &tx, 8, nds::EfaTrafficFieldOffset(2, nds::kEfaRxBytes)), 8);
  ASSERT_EQ(pwrite(fd, nds::kEfaTrafficMagic, 4, nds::kEfaTrafficOffset), 4);
  close(fd);
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

  ASSERT_TRUE(ds->SetCoreCounter(1, nds::kTimeInUse, 777).ok());
  ASSERT_TRUE(ds->SetCoreCounter(1, nds::kInferCompleted, 3).ok());
  KillChild(pid);
  ASSERT_TRUE(WaitUntil([&] { return !fs::exists(ds->path()); }, kCeiling)) << node_->DaemonLog();
  // Busy time into both physical cores of the group, counts into the first.
  EXPECT_EQ(U64(core(2) / "other_info/nc_time_in_use/total"), 777u);
  EXPECT_EQ(U64(core(3) / "other_info/nc_time_in_use/total"), 777u);
  EXPECT_EQ(U64(core(2) / "status/success/total"), 3u);
  EXPECT_EQ(U64(core(3) / "status/success/total"), 0u);
  EXPECT_EQ(U64(core(2) / "memory_usage/device_mem/tensors/total"), 0u);
  EXPECT_EQ(U64(core(3) / "memory_usage/device_mem/tensors/total"), 0u);
  EXPECT_EQ(carrying(), 1);  // port counters are monotonic: traffic stays counted
}

TEST_F(DaemonRuntimeTest, AtStartLiveDatastoresAreMirroredAndFinishedOnesDropped) {
  // Left by runtimes of a previous daemon: one whose process has exited, one still running.
  const pid_t dead = Spawn({"true"}, tmp_.path() / "dead.out", tmp_.path() / "dead.err");
  ASSERT_EQ(WaitExit(dead, kCeiling), 0);
  const pid_t live = Child();
  auto old_ds = Datastore(0, dead);
  auto live_ds = Datastore(0, live);
  ASSERT_NE(old_ds, nullptr);
  ASSERT_NE(live_ds, nullptr);
  ASSERT_TRUE(old_ds->SetCoreCounter(0, nds::kInferCompleted, 9).ok());
  ASSERT_TRUE(old_ds->SetCoreCounter(0, nds::kMemUsageTensorsDevice, 111).ok());
  ASSERT_TRUE(live_ds->SetCoreCounter(0, nds::kMemUsageTensorsDevice, 222).ok());

  node_->Up("inf2.xlarge");
  ASSERT_TRUE(WaitUntil([&] { return !fs::exists(old_ds->path()); }, kCeiling));
  EXPECT_TRUE(WaitUntil([&] { return Is(Mem(0, "tensors/total"), 222); }, kCeiling));
  EXPECT_TRUE(fs::exists(live_ds->path()));
  // The dead runtime's counters belonged to the previous driver: not folded into the new tree.
  EXPECT_EQ(U64(Status(0, "success/total")), 0u);
}

TEST_F(DaemonRuntimeTest, PowerFollowsBusyTime) {
  node_->Up("inf2.xlarge", {"--power-period-ms", "1000"});
  const fs::path power = node_->Device(0) / "stats/power/utilization";
  auto avg = [&]() -> std::optional<double> {
    const std::string text = ReadFile(power);
    if (!text.starts_with("POWER_STATUS_VALID,")) return std::nullopt;
    return std::stod(text.substr(text.rfind(',') + 1));
  };
  // Idle: the modelled idle level of Inferentia2 (11 % plus a small offset).
  ASSERT_TRUE(WaitUntil([&] { return avg().has_value(); }, kCeiling)) << ReadFile(power);
  EXPECT_LT(*avg(), 20.0);

  const pid_t pid = Child();
  auto ds = Datastore(0, pid);
  ASSERT_NE(ds, nullptr);
  // Both cores busy all the time: busy microseconds grow with the wall clock.
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    const auto start = std::chrono::steady_clock::now();
    while (!stop) {
      const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::steady_clock::now() - start)
                          .count();
      (void)ds->SetCoreCounter(0, nds::kTimeInUse, static_cast<uint64_t>(us));
      (void)ds->SetCoreCounter(1, nds::kTimeInUse, static_cast<uint64_t>(us));
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
  node_->Up("trn1.2xlarge");
  const pid_t self = getpid();  // the lock holder and datastore owner: this test process
  auto ds = Datastore(0, self);
  ASSERT_NE(ds, nullptr);
  ds->SetProcessTag("llama-worker-0");
  ASSERT_TRUE(ds->SetCoreCounter(1, nds::kMemUsageTensorsDevice, 4096).ok());
  const fs::path lock = root_ / "run/neuron/cores/1";
  const int fd = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
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
  close(fd);
  ASSERT_TRUE(ds->Remove().ok());
}

TEST_F(DaemonRuntimeTest, PrintkAppendsToKmsgVerbatim) {
  node_->Up("inf2.xlarge");
  const RootPaths paths(root_);
  const std::string text =
      "nrt: NEURON_HW_ERR=HBM_UNCORRECTABLE_ERROR instance-id=i-0 nd-id=0 nc-id=1 "
      "action=TERMINATE_INSTANCE";
  ASSERT_TRUE(SendPrintk(paths, 3, text).ok());
  ASSERT_TRUE(SendPrintk(paths, 6, "two  spaces\tand a tab").ok());
  const std::string kmsg = ReadFile(root_ / "dev/kmsg");
  // "<prio>,<seq>,<usec>,-;<text>" (README D9); KERN_ERR is 3; a tab is escaped as the kernel does.
  EXPECT_THAT(kmsg, MatchesRegex(fmt::format("(.|\n)*\n3,[0-9]+,[0-9]+,-;{}\n(.|\n)*", text)));
  EXPECT_THAT(kmsg, HasSubstr(",-;two  spaces\\x09and a tab\n"));
  EXPECT_THAT(kmsg, MatchesRegex("(.|\n)*\n6,[0-9]+,[0-9]+,-;two (.|\n)*"));

  // What the driver refuses: more than 511 bytes; what one line cannot carry: a newline.
  EXPECT_TRUE(absl::IsInvalidArgument(SendPrintk(paths, 3, std::string(512, 'x'))));
  EXPECT_TRUE(SendPrintk(paths, 3, std::string(511, 'x')).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(SendPrintk(paths, 3, "a\nb")));
  EXPECT_TRUE(absl::IsInvalidArgument(SendPrintk(paths, 8, "level")));
}

// The printk request line: everything after "-- " is the text, verbatim (README "ctl protocol").
TEST(CtlPrintkTest, RequestLineCarriesTheTextVerbatim) {
  absl::StatusOr<CtlRequest> r = ParseCtlLine("printk --level 4 --  two  spaces\tand a tab");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->command, CtlCommand::kPrintk);
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
