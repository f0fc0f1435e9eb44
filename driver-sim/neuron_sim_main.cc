// neuron-sim: the simulated Neuron node. The list of verbs: each room registers its own
// (driver-sim/command.h; docs/architecture.md#command-line-contracts, which command_contract_test
// holds to `neuron-sim --help`):
//   up, ctl, exec   the node daemon (the simulated driver), talking to it, a command under its
//                   device node (driver/)
//   run             a workload on the node through libnrt-sim (workloads/)
//   kubelet, pod    the kubelet emulator and its pods (kubelet/)
//   predict         a training job's step time from the device model (model/)
//   health-programs the active health check's reference programs (workloads/)
//   cluster         several simulated nodes, each with its kubelet (cluster/)
//   job             multi-node training jobs on a simulated cluster (cluster/)
//   apiserver       the API stand-in for ResourceSlices and ResourceClaims (controlplane/)
//   schedule        allocate DRA claims on a node through the API server (controlplane/)
// Exit codes: 0 success, 1 failure, 2 usage (docs/architecture.md#readiness-and-lifecycle).

#include <fmt/format.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "core/base/guarded_main.h"
#include "core/base/version.h"
#include "core/driver/sysfs_names.h"
#include "driver-sim/cluster/cluster_command.h"
#include "driver-sim/cluster/job_command.h"
#include "driver-sim/command.h"
#include "driver-sim/controlplane/apiserver_command.h"
#include "driver-sim/controlplane/schedule_command.h"
#include "driver-sim/driver/ctl_command.h"
#include "driver-sim/driver/exec_command.h"
#include "driver-sim/driver/up_command.h"
#include "driver-sim/kubelet/kubelet_command.h"
#include "driver-sim/model/predict_command.h"
#include "driver-sim/workloads/health_programs.h"
#include "driver-sim/workloads/run_command.h"

namespace {

using neuron::sim::Command;
using neuron::sim::kExitUsage;

int Main(int argc, char** argv) {
  // Replies go to clients that may have gone; a write must fail with EPIPE, not kill the node.
  signal(SIGPIPE, SIG_IGN);
  CLI::App app{
      "neuron-sim: a simulated AWS Neuron node: its driver, devices, faults, runtime and kubelet"};
  app.require_subcommand(1);
  app.set_version_flag("--version", neuron::VersionLine("neuron-sim"),
                       "print the version, revision, build date and compiler, then exit");
  app.footer(
      "Examples:\n"
      "  neuron-sim up --instance trn1.32xlarge --root /tmp/node\n"
      "  neuron-sim exec --root /tmp/node -- neuron-ls --root /tmp/node --wide");
  // The words after "--" of ctl, exec and pod run (command.h); the verbs keep a reference.
  neuron::sim::CommandTail tail;
  // In `neuron-sim --help`'s order.
  const std::vector<Command> commands{
      neuron::sim::AddUpCommand(app),       neuron::sim::AddCtlCommand(app, tail),
      neuron::sim::AddRunCommand(app),      neuron::sim::AddExecCommand(app, tail),
      neuron::sim::AddKubeletCommand(app),  neuron::sim::AddPodCommand(app, tail),
      neuron::sim::AddPredictCommand(app),  neuron::sim::AddClusterCommand(app),
      neuron::sim::AddJobCommand(app),      neuron::sim::AddApiServerCommand(app),
      neuron::sim::AddScheduleCommand(app), neuron::sim::AddHealthProgramsCommand(app)};
  argc = tail.Split(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kExitUsage;
  }
  for (const auto& [cmd, run] : commands) {
    if (cmd->parsed()) return run();
  }
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) { return neuron::GuardedMain("neuron-sim", Main, argc, argv); }
