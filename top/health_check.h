#pragma once
// The active health check, `neuron-ls --health-check` (docs/OPERATIONS.md#active-check): small
// reference programs with known results run through libnrt on devices withheld from allocation
// for the check's duration (core/node/withhold.h) and used by nobody: a computation on every
// NeuronCore of each device and an exchange over each NeuronLink between two checked devices.
// Outputs are compared byte for byte with the expected ones; execution times against a baseline
// that the first passing run records under the state directory.
//
// Every program runs in a child process (this binary again, in its child mode), because nrt_init
// is once per process and libnrt's state must not leak from one program into the next; each
// child has NEURON_RT_VISIBLE_CORES set to its one core and is killed at the timeout. Nothing
// here runs while no check does.
//
// Thread-compatible: one check per call, from main.

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "core/discovery/inventory.h"
#include "top/node_health.h"

namespace neuron::top {

inline constexpr std::string_view kDefaultProgramsDir = "/opt/neuron-node-agent/health-check";
inline constexpr std::string_view kDefaultStateDir = "/var/lib/neuron-node-agent";

// Exit codes beyond neuron-ls's own (top/README.md).
inline constexpr int kExitCheckFailed = 1;     // a device or a link failed
inline constexpr int kExitNoPrograms = 6;      // no reference program or no libnrt to run it
inline constexpr int kExitNothingChecked = 7;  // every requested device was skipped

// A program that takes longer than this is a hang: the child is killed and the program fails.
inline constexpr std::chrono::seconds kProgramTimeout{5};
// Children at once, at most (and no more than the CPUs the check may run on): each loads libnrt
// and its own core; more only queue on the node's CPUs.
inline constexpr int kParallelChildren = 8;

struct HealthCheckOptions {
  std::string root = "/";
  std::vector<int> devices = {};  // empty: every device of the inventory
  std::string programs = std::string(kDefaultProgramsDir);
  std::string state_dir = std::string(kDefaultStateDir);
  std::string libnrt = {};  // --libnrt; LibnrtPath resolves it as the records reader does
  std::string agent = std::string(kDefaultAgent);
  bool json = false;
  // The caller (the plugin's reset remediation) holds every device's exclusive withhold lock
  // already, so the check must not take it again (it would conflict with the caller's).
  bool withheld_by_caller = false;
  std::string self_exe = "/proc/self/exe";  // the binary whose child mode runs a program
  std::chrono::milliseconds timeout = kProgramTimeout;
};

// Runs the check over `inventory`'s devices, prints the report (text or JSON) on stdout and
// messages on stderr, and returns the exit code.
int RunHealthCheck(const HealthCheckOptions& options, const Inventory& inventory);

// The child mode's word: `neuron-ls --health-check-child PROGRAMS NAME RANK LIBNRT`. Not for
// people; the check starts it.
inline constexpr std::string_view kChildModeFlag = "--health-check-child";

// The child mode: runs program NAME of the manifest in PROGRAMS as rank RANK through LIBNRT,
// compares its outputs with the expected ones and prints one line of JSON, {"result": {...}},
// on stdout. Returns 0 when it could report, 2 on bad arguments.
int HealthCheckChildMain(const std::vector<std::string>& args);

}  // namespace neuron::top
