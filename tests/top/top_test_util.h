#pragma once
// Helpers shared by the neuron-ls / neuron-top tests: running binaries, golden files, simulated
// trees, a running simulated node with a workload (the tools read live data only through the
// driver's device ABI, which `neuron-sim up` serves to processes under `neuron-sim exec`), and
// fake ROOT/proc entries (docs/architecture.md#process-information: the tools read ROOT/proc when
// it exists, so tests can give a process any PID, command line and cgroup).

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

#include "core/discovery/inventory.h"
#include "driver-sim/driver/sim_tree.h"
#include "tests/support/process.h"
#include "tests/support/sim_node.h"
#include "tests/support/sim_testing.h"
#include "tests/support/sim_tree_fixture.h"

namespace neuron::top::testing {

using ::neuron::testing::ReadFile;
using ::neuron::testing::Spawn;
using ::neuron::testing::Stop;
using ::neuron::testing::WaitExit;
using ::neuron::testing::WaitUntil;
using ::neuron::testing::WriteFile;

namespace fs = std::filesystem;

// Runs to completion (killed after `ceiling`), capturing stdout and stderr via files in `work`.
using ::neuron::testing::RunCommand;
using ::neuron::testing::RunResult;

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
  return ::neuron::testing::MakeSimTree(root, instance,
                                        {.lnc = lnc, .instance_id = "i-aabbccdd123456789"});
}

// Discovery of a simulated tree without a driver to answer DEVICE_BDF_EXT: the catalog's PCI
// addresses stand in for the driver's (the simulator answers with the same ones).
inline Inventory ScanTree(const sim::SimTree& tree, int lnc = 0) {
  absl::StatusOr<Inventory> inv = ::neuron::testing::ScanSimTree(tree, lnc);
  EXPECT_TRUE(inv.ok()) << inv.status();
  return inv.ok() ? *std::move(inv) : Inventory{};
}

// A running simulated node (`neuron-sim up`) and the workloads started on it
// (tests/support/sim_node.h).
using ::neuron::testing::SimNode;

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
