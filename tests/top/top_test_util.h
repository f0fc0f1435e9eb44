#pragma once
// Helpers shared by the neuron-ls / neuron-top tests: running binaries, golden files, simulated
// trees, a running simulated node with a workload (the tools read live data only through the
// driver's device ABI, which `neuron-sim up` serves to processes under `neuron-sim exec`), and
// fake ROOT/proc entries (DESIGN decision 14: the tools read ROOT/proc when it exists, so tests
// can give a process any PID, command line and cgroup).

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/discovery/bdf.h"
#include "core/model/catalog.h"
#include "core/discovery/inventory.h"
#include "driver-sim/driver/sim_tree.h"
#include "tests/support/process.h"

namespace neuron::top::testing {

using ::neuron::testing::ReadFile;
using ::neuron::testing::Spawn;
using ::neuron::testing::Stop;
using ::neuron::testing::WaitExit;
using ::neuron::testing::WaitUntil;
using ::neuron::testing::WriteFile;

namespace fs = std::filesystem;

struct RunResult {
  int code = -1;
  std::string out;
  std::string err;
};

// Runs to completion (killed after `ceiling`), capturing stdout and stderr via files in `work`.
inline RunResult RunCommand(const fs::path& work, std::vector<std::string> args,
                            const std::vector<std::string>& env = {},
                            std::chrono::milliseconds ceiling = std::chrono::seconds(60)) {
  static int counter = 0;
  const std::string tag = std::to_string(::getpid()) + "." + std::to_string(++counter);
  const fs::path out = work / ("run." + tag + ".out");
  const fs::path err = work / ("run." + tag + ".err");
  const pid_t pid = Spawn(std::move(args), out, err, env);
  RunResult r;
  if (pid < 0) return r;
  std::optional<int> code = WaitExit(pid, ceiling);
  if (!code) {
    kill(pid, SIGKILL);
    WaitExit(pid, std::chrono::seconds(10));
  }
  r.code = code.value_or(-1);
  r.out = ReadFile(out);
  r.err = ReadFile(err);
  fs::remove(out);
  fs::remove(err);
  return r;
}

// Compares `actual` with tests/fixtures/top/<name>; NEURON_UPDATE_GOLDENS=1 rewrites it.
inline void ExpectGolden(const std::string& name, const std::string& actual) {
  const fs::path golden = fs::path(NEURON_SOURCE_DIR) / "tests/fixtures/top" / name;
  const char* update = std::getenv("NEURON_UPDATE_GOLDENS");
  if (update != nullptr && std::string_view(update) == "1") {
    WriteFile(golden, actual);
    return;
  }
  ASSERT_TRUE(fs::exists(golden)) << golden << " is missing; run with NEURON_UPDATE_GOLDENS=1";
  EXPECT_EQ(actual, ReadFile(golden))
      << "differs from " << golden << " (NEURON_UPDATE_GOLDENS=1 rewrites it)";
}

// A simulated node's tree under `root` with a fixed instance id (goldens must not depend on the
// temporary path, from which the simulator otherwise derives the id).
inline std::unique_ptr<sim::SimTree> MakeTree(const fs::path& root, std::string_view instance,
                                              int lnc = 0) {
  const InstanceSpec* spec = *FindInstance(instance);
  const int resolved = *ResolveLnc(*spec, lnc);
  auto tree = std::make_unique<sim::SimTree>(
      RootPaths(root), sim::NodeConfig{spec, resolved, "i-aabbccdd123456789", ""});
  const absl::Status s = tree->Create();
  EXPECT_TRUE(s.ok()) << s;
  return tree;
}

// Discovery of a simulated tree without a driver to answer DEVICE_BDF_EXT: the catalog's PCI
// addresses stand in for the driver's (the simulator answers with the same ones).
inline Inventory ScanTree(const fs::path& root, std::string_view instance, int lnc = 0) {
  const InstanceSpec* spec = *FindInstance(instance);
  DiscoveryOptions options;
  options.lnc = lnc;
  options.bdf_resolver = [spec](const RootPaths&) {
    std::vector<std::string> bdfs;
    for (const DevicePlacement& p : spec->placement) bdfs.push_back(p.bdf);
    return MakeTableBdfResolver(std::move(bdfs));
  };
  absl::StatusOr<Inventory> inv = MakeDirectoryDiscovery(RootPaths(root), options)->Scan();
  EXPECT_TRUE(inv.ok()) << inv.status();
  return inv.ok() ? *std::move(inv) : Inventory{};
}

// A running simulated node (`neuron-sim up`) and optionally a workload on it (`neuron-sim run`,
// which runs under the simulated driver by itself). Everything is stopped with SIGTERM when the
// object goes.
class SimNode {
 public:
  static constexpr auto kReady = std::chrono::seconds(180);  // a ceiling (decision 15)

  // `dir` holds ROOT (dir/root) and the processes' output.
  SimNode(std::string sim_bin, const fs::path& dir, std::string_view instance)
      : sim_bin_(std::move(sim_bin)), dir_(dir), root_(dir / "root") {
    fs::create_directories(root_);
    daemon_ = Spawn({sim_bin_, "up", "--instance", std::string(instance), "--root", root_.string()},
                    dir_ / "up.out", dir_ / "up.err");
    ready_ = WaitUntil([&] { return fs::exists(root_ / "run/neuron/sim.ready"); }, kReady);
  }
  ~SimNode() {
    // Never kill(-1): a failed Spawn returns -1.
    for (auto it = pids_.rbegin(); it != pids_.rend(); ++it) {
      if (*it > 0) Stop(*it, std::chrono::seconds(60));
    }
    if (daemon_ > 0) Stop(daemon_, std::chrono::seconds(60));
  }
  SimNode(const SimNode&) = delete;
  SimNode& operator=(const SimNode&) = delete;

  bool ready() const { return ready_; }
  const fs::path& root() const { return root_; }
  std::string Log() const { return ReadFile(dir_ / "up.err"); }

  // `neuron-sim run --workload matmul` on `cores` (NEURON_RT_VISIBLE_CORES) until stopped.
  // Returns its PID once it has completed a step, i.e. holds its cores and datastores; -1 when
  // it did not within the ceiling.
  pid_t StartWorkload(const std::string& cores) {
    const fs::path out = dir_ / ("run." + std::to_string(pids_.size()) + ".out");
    const pid_t pid =
        Spawn({sim_bin_, "run", "--root", root_.string(), "--workload", "matmul", "--steps", "0"},
              out, out.string() + ".err", {"NEURON_RT_VISIBLE_CORES=" + cores});
    pids_.push_back(pid);
    const bool stepped =
        WaitUntil([&] { return ReadFile(out).find("step 1 ") != std::string::npos; }, kReady);
    return stepped ? pid : -1;
  }

  // Starts `args` under the simulated driver (`neuron-sim exec --root ROOT -- args...`), to be
  // stopped with the node.
  pid_t StartUnderDriver(const std::vector<std::string>& args, const std::string& name) {
    pids_.push_back(Spawn(UnderDriver(args), dir_ / (name + ".out"), dir_ / (name + ".err")));
    return pids_.back();
  }

  // `args` as a command line that runs under the simulated driver.
  std::vector<std::string> UnderDriver(const std::vector<std::string>& args) const {
    std::vector<std::string> argv{sim_bin_, "exec", "--root", root_.string(), "--"};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }

 private:
  std::string sim_bin_;
  fs::path dir_;
  fs::path root_;
  pid_t daemon_ = -1;
  bool ready_ = false;
  std::vector<pid_t> pids_;
};

// ROOT/proc/<pid>/{cmdline,stat,cgroup} and fd links, as the host's /proc would show them.
struct FakeProcess {
  int pid = 0;
  std::vector<std::string> argv;
  std::vector<std::string> open_files;  // fd targets, e.g. "/dev/neuron0"
  std::string cgroup = "0::/user.slice\n";
  uint64_t utime = 0;
  uint64_t stime = 0;
};

inline void AddFakeProcess(const fs::path& root, const FakeProcess& p) {
  const fs::path dir = root / "proc" / std::to_string(p.pid);
  std::string cmdline;
  for (const std::string& a : p.argv) cmdline += a + '\0';
  WriteFile(dir / "cmdline", cmdline);
  const std::string comm = p.argv.empty() ? "x" : fs::path(p.argv.front()).filename().string();
  WriteFile(dir / "stat", std::to_string(p.pid) + " (" + comm + ") S 1 1 1 0 -1 4194304 0 0 0 0 " +
                              std::to_string(p.utime) + " " + std::to_string(p.stime) +
                              " 0 0 20 0 1 0 12345 1000000 250 18446744073709551615\n");
  WriteFile(dir / "cgroup", p.cgroup);
  fs::create_directories(dir / "fd");
  int fd = 3;
  for (const std::string& target : p.open_files) {
    fs::create_symlink(target, dir / "fd" / std::to_string(fd++));
  }
}

inline void WriteProcStat(const fs::path& root, uint64_t user, uint64_t system, uint64_t idle,
                          int cpus) {
  std::string text = "cpu  " + std::to_string(user) + " 0 " + std::to_string(system) + " " +
                     std::to_string(idle) + " 0 0 0 0 0 0\n";
  for (int i = 0; i < cpus; ++i) text += "cpu" + std::to_string(i) + " 1 0 1 1 0 0 0 0 0 0\n";
  WriteFile(root / "proc/stat", text);
}

}  // namespace neuron::top::testing
