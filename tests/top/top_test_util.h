#pragma once
// Helpers shared by the neuron-ls / neuron-top tests: running binaries, simulated
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
#include "tests/support/fake_proc.h"
#include "tests/support/golden.h"
#include "tests/support/process.h"
#include "tests/support/sim_node.h"
#include "tests/support/sim_testing.h"
#include "tests/support/sim_tree_fixture.h"

namespace neuron::top::testing {

using ::neuron::testing::ExpectGolden;  // goldens under tests/fixtures/top/
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

// Fake ROOT/proc entries (tests/support/fake_proc.h).
using ::neuron::testing::AddFakeProcess;
using ::neuron::testing::FakeProcess;
using ::neuron::testing::WriteProcStat;

}  // namespace neuron::top::testing
