// The node daemon and ctl, tested through the real neuron-sim binary in temporary roots
// (sim_ctl_test.cc has the protocol and faults.json codecs). Expected paths, texts and values are
// written literally from docs/driver-interface.md and docs/architecture.md, not recomputed by the
// code under test.

#include <fcntl.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/base/unique_fd.h"
#include "tests/support/driver_abi_client.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace neuron::sim {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;
using ::neuron::testing::ReadFile;
using ::neuron::testing::Spawn;
using ::neuron::testing::WaitExit;
using ::neuron::testing::WaitUntil;

// Ceilings, not expectations (docs/architecture.md#timing-in-tests): building a tree is thousands
// of files, and this machine is shared and may run sanitizers.
constexpr auto kReadyCeiling = 90s;
constexpr auto kEffectCeiling = 30s;

// In place, as a user writes a sysfs file (the daemon watches IN_CLOSE_WRITE); not renamed.
void WriteFile(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
}

struct DaemonRun {
  int code = -1;
  std::string out, err;
};

// Lists every path below `dir`, relative, files with their content ("" for directories).
std::map<std::string, std::string> TreeSnapshot(const fs::path& dir) {
  std::map<std::string, std::string> m;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string rel = fs::relative(it->path(), dir).string();
    m[rel] = it->is_regular_file() && !it->is_symlink() ? ReadFile(it->path()) : "";
  }
  return m;
}

class SimDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    work_ = tmp_.path();
    root_ = work_ / "root";
    fs::create_directories(root_);
  }

  // Every daemon must stop cleanly on SIGTERM: exit 0, so a sanitizer report inside it (which
  // changes the exit code) fails the test.
  void TearDown() override {
    for (const auto& [pid, err_log] : daemons_) {
      kill(pid, SIGTERM);
      const std::optional<int> code = WaitExit(pid, kReadyCeiling);
      if (!code) {
        kill(pid, SIGKILL);
        WaitExit(pid, 10s);
      }
      EXPECT_EQ(code, 0) << "neuron-sim up did not stop cleanly:\n" << ReadFile(err_log);
    }
  }

  fs::path Log(const std::string& name) {
    return work_ / ("log." + name + "." + std::to_string(++logs_));
  }

  pid_t StartUp(const fs::path& root, const std::vector<std::string>& args) {
    std::vector<std::string> argv{NEURON_SIM_BIN, "up", "--root", root.string()};
    argv.insert(argv.end(), args.begin(), args.end());
    const fs::path err = Log("up.err");
    const pid_t pid = Spawn(argv, Log("up.out"), err);
    daemons_[pid] = err;
    return pid;
  }

  // Starts a daemon and waits for ROOT/run/neuron/sim.ready.
  pid_t Up(const fs::path& root, const std::string& instance,
           const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args{"--instance", instance};
    args.insert(args.end(), extra.begin(), extra.end());
    const pid_t pid = StartUp(root, args);
    EXPECT_TRUE(WaitUntil([&] { return fs::exists(root / "run/neuron/sim.ready"); }, kReadyCeiling))
        << "no sim.ready under " << root;
    // Start-up logs the probe's reset pair per device (docs/driver-interface.md#post-load-values);
    // tests look at what comes after.
    kmsg_start_[root] = ReadFile(root / "dev/kmsg").size();
    return pid;
  }

  DaemonRun Run(std::vector<std::string> args, const std::vector<std::string>& env = {}) {
    args.insert(args.begin(), NEURON_SIM_BIN);
    const fs::path out = Log("out"), err = Log("err");
    const pid_t pid = Spawn(args, out, err, env);
    DaemonRun r;
    const std::optional<int> code = WaitExit(pid, kEffectCeiling);
    if (!code) {
      kill(pid, SIGKILL);
      WaitExit(pid, 10s);
    }
    r.code = code.value_or(-1);
    r.out = ReadFile(out);
    r.err = ReadFile(err);
    return r;
  }

  DaemonRun Ctl(const fs::path& root, std::vector<std::string> words) {
    words.insert(words.begin(), {"ctl", "--root", root.string()});
    return Run(words);
  }
  DaemonRun Ctl(std::vector<std::string> words) { return Ctl(root_, std::move(words)); }
  // Whether `ctl status` lists a runtime process row for (device, pid).
  bool Listed(int device, pid_t pid) {
    return std::regex_search(Ctl({"status"}).out,
                             std::regex(fmt::format("\n +{} +{} ", device, pid)));
  }

  fs::path Dev(int n, const fs::path& root) const {
    return root / ("sys/devices/virtual/neuron_device/neuron" + std::to_string(n));
  }
  fs::path Dev(int n) const { return Dev(n, root_); }
  // Kernel log records written since Up() returned.
  std::string Kmsg(const fs::path& root) const {
    const auto start = kmsg_start_.find(root);
    const std::string all = ReadFile(root / "dev/kmsg");
    return start == kmsg_start_.end() ? all : all.substr(std::min(start->second, all.size()));
  }
  std::map<fs::path, size_t> kmsg_start_;
  std::string Kmsg() const { return Kmsg(root_); }

  nlohmann::json Faults(const fs::path& root) const {
    return nlohmann::json::parse(ReadFile(root / "run/neuron/faults.json"));
  }

  ::neuron::testing::TempDir tmp_{"simd_test"};
  fs::path work_, root_;
  std::map<pid_t, fs::path> daemons_;  // running daemons and their stderr logs
  int logs_ = 0;
};

TEST_F(SimDaemonTest, UpWritesReadyLastAndServesStatus) {
  Up(root_, "inf2.24xlarge");
  // sim.ready is written last: whoever sees it finds the rest in place.
  EXPECT_TRUE(fs::exists(root_ / "run/neuron/node.json"));
  EXPECT_TRUE(fs::exists(Dev(5) / "reset"));
  struct stat st {};
  ASSERT_EQ(lstat((root_ / "run/neuron/ctl.sock").c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // Driver load resets every device once (docs/driver-interface.md#post-load-values): one
  // initiating/completed pair each.
  const std::string boot_log = ReadFile(root_ / "dev/kmsg");
  for (int d = 0; d < 6; ++d) {
    EXPECT_THAT(boot_log,
                HasSubstr(fmt::format("nd{}: initiating device reset request 4294967295", d)));
    EXPECT_THAT(boot_log, HasSubstr(fmt::format("nd{}: reset request 4294967295 completed", d)));
  }

  const DaemonRun r = Ctl({"status"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("inf2.24xlarge"));
  EXPECT_THAT(r.out, HasSubstr("6 (6 present)"));
  EXPECT_THAT(r.out, HasSubstr("pending faults: none"));
  int ready_rows = 0;
  for (size_t p = r.out.find("READY"); p != std::string::npos; p = r.out.find("READY", p + 1)) {
    ++ready_rows;
  }
  EXPECT_EQ(ready_rows, 6);

  // NEURON_ROOT is the default of --root.
  const DaemonRun env = Run({"ctl", "status"}, {"NEURON_ROOT=" + root_.string()});
  EXPECT_EQ(env.code, 0) << env.err;
  EXPECT_THAT(env.out, HasSubstr("inf2.24xlarge"));
}

TEST_F(SimDaemonTest, SecondUpOnTheSameRootIsRefused) {
  const pid_t first = Up(root_, "trn1.2xlarge");
  const DaemonRun second = Run({"up", "--instance", "trn1.2xlarge", "--root", root_.string()});
  EXPECT_EQ(second.code, 1);
  EXPECT_THAT(second.err, HasSubstr("another neuron-sim daemon"));
  EXPECT_THAT(second.err, HasSubstr(std::to_string(first)));
  // The first daemon is untouched.
  EXPECT_TRUE(fs::exists(root_ / "run/neuron/sim.ready"));
  EXPECT_EQ(Ctl({"status"}).code, 0);
}

TEST_F(SimDaemonTest, StaleRootIsClearedAfterSigkill) {
  const pid_t first = Up(root_, "inf2.24xlarge");
  ASSERT_EQ(Ctl({"unplug", "--device", "2"}).code, 0);
  ASSERT_EQ(Ctl({"inject", "nan", "--device", "1"}).code, 0);
  kill(first, SIGKILL);
  ASSERT_EQ(WaitExit(first, kEffectCeiling), 128 + SIGKILL);
  daemons_.erase(first);
  ASSERT_TRUE(fs::exists(root_ / "run/neuron/sim.ready")) << "left behind by the killed daemon";
  const DaemonRun dead = Ctl({"status"});
  EXPECT_EQ(dead.code, 1);
  EXPECT_THAT(dead.err, HasSubstr("neuron-sim up"));

  // A different shape on the same root: nothing of the old node may survive. (The new sim.ready
  // may even reuse the old one's inode, so readiness is the new daemon answering.)
  StartUp(root_, {"--instance", "trn1.2xlarge"});
  ASSERT_TRUE(WaitUntil(
      [&] {
        const DaemonRun r = Ctl({"status"});
        return r.code == 0 && r.out.find("trn1.2xlarge") != std::string::npos;
      },
      kReadyCeiling));
  EXPECT_TRUE(fs::exists(root_ / "run/neuron/sim.ready"));
  EXPECT_THAT(Ctl({"status"}).out, HasSubstr("trn1.2xlarge"));
  EXPECT_TRUE(fs::exists(Dev(0)));
  EXPECT_FALSE(fs::exists(Dev(1)));
  EXPECT_FALSE(fs::exists(Dev(5)));
  EXPECT_FALSE(fs::exists(root_ / "dev/neuron5"));
  EXPECT_EQ(Faults(root_)["faults"].size(), 0u);
  EXPECT_THAT(ReadFile(root_ / "run/neuron/node.json"), HasSubstr("\"trn1.2xlarge\""));
}

TEST_F(SimDaemonTest, SigtermRemovesEverythingItCreated) {
  WriteFile(root_ / "keep.txt", "mine\n");
  const pid_t pid = Up(root_, "trn1.32xlarge");
  ASSERT_EQ(Ctl({"inject", "hbm-ue", "--device", "3"}).code, 0);
  ASSERT_EQ(Ctl({"unplug", "--device", "4"}).code, 0);
  ASSERT_EQ(Ctl({"efa-down", "--efa", "rdmap16s26"}).code, 0);
  daemons_.erase(pid);
  kill(pid, SIGTERM);
  EXPECT_EQ(WaitExit(pid, kReadyCeiling), 0);
  std::set<std::string> left;
  for (const auto& [path, content] : TreeSnapshot(root_)) left.insert(path);
  EXPECT_EQ(left, std::set<std::string>{"keep.txt"});
}

TEST_F(SimDaemonTest, UnplugAndPlugKeepTheIndex) {
  Up(root_, "inf2.24xlarge");
  DaemonRun r = Ctl({"unplug", "--device", "3"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(fs::exists(Dev(3)));
  EXPECT_FALSE(fs::exists(fs::symlink_status(root_ / "sys/class/neuron_device/neuron3")));
  EXPECT_FALSE(fs::exists(root_ / "dev/neuron3"));
  EXPECT_TRUE(fs::exists(Dev(2)));
  EXPECT_TRUE(fs::exists(root_ / "dev/neuron4"));
  EXPECT_THAT(Kmsg(), HasSubstr("Slot(nd3): Link Down"));

  r = Ctl({"unplug", "--device", "3"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("already unplugged"));
  r = Ctl({"inject", "hbm-ue", "--device", "3"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("device 3 is unplugged"));
  r = Ctl({"reset", "--device", "3"});
  EXPECT_EQ(r.code, 1);
  r = Ctl({"unplug", "--device", "99"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("unknown device 99"));

  r = Ctl({"plug", "--device", "3"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(root_ / "sys/class/neuron_device/neuron3"));
  EXPECT_TRUE(fs::exists(root_ / "dev/neuron3"));
  EXPECT_EQ(ReadFile(Dev(3) / "reset"), "1\n");
  EXPECT_EQ(ReadFile(Dev(3) / "neuron_core0/stats/other_info/reset_req_count/total"), "1\n");
  EXPECT_THAT(Kmsg(), HasSubstr("nd3: reset request 4294967295 completed"));
  EXPECT_EQ(Ctl({"plug", "--device", "3"}).code, 1);
}

TEST_F(SimDaemonTest, HbmAndSramErrorsRaiseCountersAndRecordFaults) {
  Up(root_, "inf2.24xlarge");
  const fs::path hw = Dev(2) / "stats/hardware";
  ASSERT_EQ(ReadFile(hw / "mem_ecc_uncorrected"), "0\n");
  ASSERT_EQ(Ctl({"inject", "hbm-ue", "--device", "2"}).code, 0);
  EXPECT_EQ(ReadFile(hw / "mem_ecc_uncorrected"), "1\n");
  ASSERT_EQ(Ctl({"inject", "hbm-ue", "--device", "2"}).code, 0);
  EXPECT_EQ(ReadFile(hw / "mem_ecc_uncorrected"), "2\n");
  const DaemonRun sram = Ctl({"inject", "sram-ue", "--device", "2", "--core", "1"});
  ASSERT_EQ(sram.code, 0) << sram.err;
  EXPECT_EQ(ReadFile(hw / "sram_ecc_uncorrected"), "1\n");
  EXPECT_EQ(ReadFile(hw / "mem_ecc_repairable_uncorrected"), "0\n");
  EXPECT_EQ(ReadFile(Dev(1) / "stats/hardware/mem_ecc_uncorrected"), "0\n");

  const nlohmann::json f = Faults(root_)["faults"];
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0]["kind"], "hbm-ue");
  EXPECT_EQ(f[0]["device"], 2);
  EXPECT_FALSE(f[0].contains("core"));
  EXPECT_EQ(f[2]["kind"], "sram-ue");
  EXPECT_EQ(f[2]["core"], 1);
  EXPECT_THAT(Ctl({"status"}).out, HasSubstr("sram-ue on device 2 core 1"));

  const DaemonRun bad_core = Ctl({"inject", "sram-ue", "--device", "2", "--core", "2"});
  EXPECT_EQ(bad_core.code, 1);
  EXPECT_THAT(bad_core.err, HasSubstr("NeuronCores 0-1"));
}

TEST_F(SimDaemonTest, ResetGoesThroughResetToReady) {
  Up(root_, "inf2.24xlarge", {"--reset-ms", "4000"});
  ASSERT_EQ(Ctl({"inject", "nan", "--device", "1"}).code, 0);
  const DaemonRun r = Ctl({"reset", "--device", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ReadFile(Dev(1) / "reset"), "0\n");
  EXPECT_THAT(Kmsg(), HasSubstr("neuron:nr_reset_thread_fn: nd1: initiating device reset request "
                                "4294967295"));
  for (const char* core : {"neuron_core0", "neuron_core1"}) {
    EXPECT_EQ(ReadFile(Dev(1) / core / "stats/other_info/reset_req_count/total"), "2\n") << core;
  }
  const DaemonRun again = Ctl({"reset", "--device", "1"});
  EXPECT_EQ(again.code, 1);
  EXPECT_THAT(again.err, HasSubstr("already in progress"));

  // State and counters are written before the kmsg record, so the record comes last.
  ASSERT_TRUE(WaitUntil(
      [&] {
        return Kmsg().find(
                   "neuron:nr_reset_thread_fn: nd1: reset request "
                   "4294967295 completed") != std::string::npos;
      },
      kEffectCeiling));
  EXPECT_EQ(ReadFile(Dev(1) / "reset"), "1\n");
  EXPECT_EQ(ReadFile(Dev(1) / "neuron_core1/stats/other_info/reset_fail_count/total"), "0\n");
  // A reset to READY is fresh hardware: the device's pending faults are gone.
  EXPECT_EQ(Faults(root_)["faults"].size(), 0u);
  EXPECT_EQ(ReadFile(Dev(0) / "neuron_core0/stats/other_info/reset_req_count/total"), "1\n");
}

TEST_F(SimDaemonTest, FailedResetEndsInvalidAndAnotherResetRecovers) {
  Up(root_, "inf2.24xlarge", {"--reset-ms", "200"});
  ASSERT_EQ(Ctl({"reset", "--device", "4", "--fail"}).code, 0);
  ASSERT_TRUE(WaitUntil(
      [&] { return Kmsg().find("nd4: reset request 4294967295 failed") != std::string::npos; },
      kEffectCeiling));
  EXPECT_EQ(ReadFile(Dev(4) / "reset"), "2\n");
  for (const char* core : {"neuron_core0", "neuron_core1"}) {
    EXPECT_EQ(ReadFile(Dev(4) / core / "stats/other_info/reset_fail_count/total"), "1\n");
  }
  EXPECT_THAT(Ctl({"status"}).out, HasSubstr("INVALID"));
  ASSERT_EQ(Ctl({"reset", "--device", "4"}).code, 0);
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(Dev(4) / "reset") == "1\n"; }, kEffectCeiling));
  EXPECT_EQ(ReadFile(Dev(4) / "neuron_core0/stats/other_info/reset_req_count/total"), "3\n");
}

TEST_F(SimDaemonTest, RuntimeFaultsGoOnlyToFaultsJson) {
  Up(root_, "inf2.24xlarge");
  auto sysfs = [&] {
    std::map<std::string, std::string> m = TreeSnapshot(root_ / "sys");
    // The power rollup may tick during the test; it is not a fault's doing.
    std::erase_if(m, [](const auto& kv) { return kv.first.ends_with("stats/power/utilization"); });
    return m;
  };
  const auto before = sysfs();
  ASSERT_GT(before.size(), 1000u);
  ASSERT_EQ(Ctl({"inject", "nan", "--device", "0"}).code, 0);
  ASSERT_EQ(Ctl({"inject", "hang", "--device", "1", "--core", "0"}).code, 0);
  ASSERT_EQ(Ctl({"inject", "dma-abort", "--device", "2"}).code, 0);
  const DaemonRun link = Ctl({"link-down", "--device", "0", "--peer", "1"});
  ASSERT_EQ(link.code, 0) << link.err;
  EXPECT_EQ(sysfs(), before);

  const nlohmann::json f = Faults(root_)["faults"];
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[0]["kind"], "nan");
  EXPECT_EQ(f[1]["kind"], "hang");
  EXPECT_EQ(f[1]["core"], 0);
  EXPECT_EQ(f[2]["kind"], "dma-abort");
  EXPECT_EQ(f[2]["device"], 2);
  EXPECT_EQ(f[3]["kind"], "link-down");
  EXPECT_EQ(f[3]["device"], 0);
  EXPECT_EQ(f[3]["peer"], 1);

  // inf2.24xlarge is a chain: 0-1-2-3-4-5 (docs/driver-interface.md#connected-devices).
  const DaemonRun far = Ctl({"link-down", "--device", "0", "--peer", "5"});
  EXPECT_EQ(far.code, 1);
  EXPECT_THAT(far.err, HasSubstr("devices 0 and 5 are not NeuronLink neighbours"));

  const uint64_t first_id = f[0]["id"].get<uint64_t>();
  ASSERT_EQ(Ctl({"clear-fault", "--id", std::to_string(first_id)}).code, 0);
  EXPECT_EQ(Faults(root_)["faults"].size(), 3u);
  EXPECT_EQ(Ctl({"clear-fault", "--id", std::to_string(first_id)}).code, 1);
}

TEST_F(SimDaemonTest, EfaDownAndUp) {
  Up(root_, "trn1.32xlarge");
  const fs::path cls = root_ / "sys/class/infiniband/rdmap16s25";
  ASSERT_TRUE(fs::exists(cls / "ports/1/state"));
  ASSERT_EQ(Ctl({"efa-down", "--efa", "rdmap16s25"}).code, 0);
  EXPECT_FALSE(fs::exists(fs::symlink_status(cls)));
  EXPECT_FALSE(fs::exists(root_ / "dev/infiniband/uverbs0"));
  EXPECT_TRUE(fs::exists(root_ / "sys/class/infiniband/rdmap16s26"));
  EXPECT_THAT(Ctl({"status"}).out,
              ::testing::ContainsRegex("rdmap16s25 +0000:10:19.0 +uverbs0 +down"));
  EXPECT_EQ(Ctl({"efa-down", "--efa", "rdmap16s25"}).code, 1);
  ASSERT_EQ(Ctl({"efa-up", "--efa", "rdmap16s25"}).code, 0);
  EXPECT_EQ(ReadFile(cls / "ports/1/state"), "4: ACTIVE\n");
  EXPECT_TRUE(fs::exists(root_ / "dev/infiniband/uverbs0"));

  const DaemonRun unknown = Ctl({"efa-down", "--efa", "eth0"});
  EXPECT_EQ(unknown.code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("unknown EFA 'eth0'"));
  EXPECT_THAT(unknown.err, HasSubstr("rdmap160s26"));
}

TEST_F(SimDaemonTest, SysfsResetWriteResetsOnlyADeviceNobodyHasOpen) {
  Up(root_, "inf2.24xlarge", {"--reset-ms", "300"});
  // Device 2 is open: a live process (this test) attached to it with a datastore.
  UniqueFd fd = neuron::testing::OpenAndClaimDatastore(root_ / "dev/neuron2");
  ASSERT_TRUE(fd.valid()) << std::strerror(errno);
  WriteFile(Dev(2) / "reset", "9\n");
  // The daemon answers every write by restoring the state (D4, driver-sim/README.md#deviations);
  // then it has seen this one.
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(Dev(2) / "reset") == "1\n"; }, kEffectCeiling));
  EXPECT_THAT(Kmsg(), Not(HasSubstr("nd2: initiating")));
  EXPECT_EQ(ReadFile(Dev(2) / "neuron_core0/stats/other_info/reset_req_count/total"), "1\n");
  EXPECT_TRUE(Listed(2, getpid()));

  fd.Reset();  // the last close: the driver's open count drops to 0
  WriteFile(Dev(2) / "reset", "1\n");
  ASSERT_TRUE(WaitUntil(
      [&] { return Kmsg().find("nd2: reset request 4294967295 completed") != std::string::npos; },
      kEffectCeiling));
  EXPECT_EQ(ReadFile(Dev(2) / "reset"), "1\n");
  EXPECT_EQ(ReadFile(Dev(2) / "neuron_core1/stats/other_info/reset_req_count/total"), "2\n");

  // A process that died with the device open does not hold it: its death closed its fds.
  const pid_t child = fork();
  if (child == 0) {
    _exit(neuron::testing::OpenAndClaimDatastore(root_ / "dev/neuron3").valid() ? 0 : 1);
  }
  ASSERT_EQ(WaitExit(child, kEffectCeiling), 0);
  // The driver learns of the death from the connection's end; its datastore row then goes.
  ASSERT_TRUE(WaitUntil([&] { return !Listed(3, child); }, kEffectCeiling));
  WriteFile(Dev(3) / "reset", "1\n");
  EXPECT_TRUE(WaitUntil(
      [&] { return Kmsg().find("nd3: reset request 4294967295 completed") != std::string::npos; },
      kEffectCeiling));
}

TEST_F(SimDaemonTest, NotifyDelayIsOneGlobalFlagAndOnlyZeroOrMinusOne) {
  Up(root_, "inf2.24xlarge");
  ASSERT_EQ(ReadFile(Dev(5) / "info/notify_delay"), "-1\n");
  WriteFile(Dev(0) / "info/notify_delay", "0\n");
  EXPECT_TRUE(
      WaitUntil([&] { return ReadFile(Dev(5) / "info/notify_delay") == "0\n"; }, kEffectCeiling));
  WriteFile(Dev(1) / "info/notify_delay", "7\n");
  EXPECT_TRUE(WaitUntil(
      [&] {
        return Kmsg().find(
                   "received invalid notify delay for sysfs "
                   "metrics: 7") != std::string::npos;
      },
      kEffectCeiling));
  EXPECT_TRUE(
      WaitUntil([&] { return ReadFile(Dev(1) / "info/notify_delay") == "0\n"; }, kEffectCeiling));
}

TEST_F(SimDaemonTest, TwoRootsDoNotInterfere) {
  const fs::path other = work_ / "other";
  fs::create_directories(other);
  Up(root_, "inf2.24xlarge");
  Up(other, "inf2.24xlarge");
  ASSERT_EQ(Ctl(root_, {"inject", "hbm-ue", "--device", "0"}).code, 0);
  ASSERT_EQ(Ctl(other, {"unplug", "--device", "1"}).code, 0);
  EXPECT_EQ(ReadFile(Dev(0, root_) / "stats/hardware/mem_ecc_uncorrected"), "1\n");
  EXPECT_EQ(ReadFile(Dev(0, other) / "stats/hardware/mem_ecc_uncorrected"), "0\n");
  EXPECT_TRUE(fs::exists(Dev(1, root_)));
  EXPECT_FALSE(fs::exists(Dev(1, other)));
  EXPECT_EQ(Faults(root_)["faults"].size(), 1u);
  EXPECT_EQ(Faults(other)["faults"].size(), 0u);
  EXPECT_THAT(Kmsg(root_), Not(HasSubstr("Link Down")));
}

TEST_F(SimDaemonTest, PowerRollsUpWithWallClockStamps) {
  Up(root_, "trn1.2xlarge", {"--power-period-ms", "1000"});
  const fs::path util = Dev(0) / "stats/power/utilization";
  ASSERT_TRUE(
      WaitUntil([&] { return ReadFile(util).starts_with("POWER_STATUS_VALID,"); }, kEffectCeiling))
      << ReadFile(util);
  // "<status>,<epoch_s>,<min>,<max>,<avg>\n", percentages "%u.%02u"
  // (docs/driver-interface.md#computed-formats).
  const std::string text = ReadFile(util);
  uint64_t epoch = 0;
  unsigned min_i = 0, min_f = 0, max_i = 0, max_f = 0, avg_i = 0, avg_f = 0;
  // The field count is the format check, and the ranges below catch a value out of range.
  ASSERT_EQ(std::sscanf(text.c_str(),  // NOLINT(cert-err34-c)
                        "POWER_STATUS_VALID,%" SCNu64 ",%u.%2u,%u.%2u,%u.%2u", &epoch, &min_i,
                        &min_f, &max_i, &max_f, &avg_i, &avg_f),
            7)
      << text;
  EXPECT_TRUE(text.ends_with("\n"));
  EXPECT_NEAR(static_cast<double>(epoch), static_cast<double>(std::time(nullptr)), 300.0);
  const unsigned min = min_i * 100 + min_f, max = max_i * 100 + max_f, avg = avg_i * 100 + avg_f;
  EXPECT_LE(min, avg);
  EXPECT_LE(avg, max);
  EXPECT_GT(avg, 0u);
  EXPECT_LT(max, 10000u);
}

TEST_F(SimDaemonTest, UsageErrorsExitTwo) {
  const std::string r = root_.string();
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {},
           {"ctl", "--root", r},
           {"ctl", "--root", r, "inject", "foo", "--device", "1"},
           {"ctl", "--root", r, "unplug"},
           {"ctl", "--root", r, "unplug", "--device", "x"},
           {"ctl", "--root", r, "reset", "--device", "1", "--core", "0"},
           {"ctl", "--root", r, "link-down", "--device", "1"},
           {"ctl", "--root", r, "efa-up"},
           {"up", "--root", r},
           {"up", "--instance", "p4d.24xlarge", "--root", r},
           {"up", "--instance", "trn1.2xlarge", "--lnc", "2", "--root", r},
       }) {
    const DaemonRun res = Run(args);
    EXPECT_EQ(res.code, 2) << ::testing::PrintToString(args) << "\n" << res.err;
    EXPECT_FALSE(res.err.empty());
  }
  EXPECT_FALSE(fs::exists(root_ / "sys"));
}

TEST_F(SimDaemonTest, CtlWithoutADaemonSaysHowToStartOne) {
  const DaemonRun r = Ctl({"status"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("ctl.sock missing"));
  EXPECT_THAT(r.err, HasSubstr("start it with neuron-sim up"));
}

TEST_F(SimDaemonTest, CtlGivesUpOnADaemonThatDoesNotAnswer) {
  const pid_t pid = Up(root_, "trn1.2xlarge");
  kill(pid, SIGSTOP);  // the kernel still accepts the connection; nobody answers
  const DaemonRun r = Run({"ctl", "--root", root_.string(), "--timeout-ms", "500", "status"});
  kill(pid, SIGCONT);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("did not answer within 500 ms"));
  EXPECT_EQ(Ctl({"status"}).code, 0);
}

TEST_F(SimDaemonTest, RootTooLongForTheSocketIsAClearError) {
  const fs::path deep = work_ / std::string(120, 'r');
  fs::create_directories(deep);
  const DaemonRun up = Run({"up", "--instance", "trn1.2xlarge", "--root", deep.string()});
  EXPECT_EQ(up.code, 1);
  EXPECT_THAT(up.err, HasSubstr("too long"));
  EXPECT_THAT(up.err, HasSubstr("107"));
  EXPECT_TRUE(fs::is_empty(deep));
  const DaemonRun ctl = Ctl(deep, {"status"});
  EXPECT_EQ(ctl.code, 1);
  EXPECT_THAT(ctl.err, HasSubstr("too long"));
}

}  // namespace
}  // namespace neuron::sim
