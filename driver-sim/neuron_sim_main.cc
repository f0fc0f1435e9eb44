// neuron-sim: the simulated Neuron node. The list of verbs: each room registers its own
// (driver-sim/command.h; docs/architecture.md#command-line-contracts, which command_contract_test
// holds to `neuron-sim --help`); `run` is still registered here until it moves to workloads/:
//   up, ctl, exec   the node daemon (the simulated driver), talking to it, a command under its
//                   device node (driver/)
//   run             a workload on the node through libnrt-sim (workloads/)
//   kubelet, pod    the kubelet emulator and its pods (kubelet/)
//   predict         a training job's step time from the device model (predict_command.h)
//   cluster         several simulated nodes, each with its kubelet (cluster/)
//   job             multi-node training jobs on a simulated cluster (job/)
//   apiserver       the API stand-in for ResourceSlices and ResourceClaims (apiserver/)
//   schedule        allocate DRA claims on a node through the API server (scheduler/)
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

#include "core/base/version.h"
#include "core/driver/sysfs_names.h"
#include "driver-sim/apiserver/apiserver_command.h"
#include "driver-sim/cluster/cluster_command.h"
#include "driver-sim/command.h"
#include "driver-sim/driver/ctl_command.h"
#include "driver-sim/driver/exec.h"
#include "driver-sim/driver/exec_command.h"
#include "driver-sim/driver/up_command.h"
#include "driver-sim/job/job_command.h"
#include "driver-sim/kubelet/kubelet_command.h"
#include "driver-sim/predict_command.h"
#include "driver-sim/scheduler/schedule_command.h"
#include "driver-sim/workloads/workload.h"

namespace {

using neuron::sim::AddRootOption;
using neuron::sim::Command;
using neuron::sim::kExitFailure;
using neuron::sim::kExitUsage;

// The command line as given, for `run` re-executing itself under the simulated driver.
std::vector<std::string>& OriginalArgs() {
  static std::vector<std::string> args;
  return args;
}

Command AddRun(CLI::App& app) {
  struct Flags {
    std::string root = "/";
    neuron::workloads::WorkloadOptions w;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* run = app.add_subcommand(
      "run",
      "run a workload on the simulated node through libnrt-sim, on every core the process is "
      "given (NEURON_RT_VISIBLE_CORES / NEURON_RT_NUM_CORES); SIGTERM or SIGINT stops it cleanly");
  AddRootOption(run, &f->root);
  run->add_option("--workload", f->w.name,
                  fmt::format("workload: {}", fmt::join(neuron::workloads::WorkloadNames(), ", ")))
      ->required();
  run->add_option("--steps", f->w.steps, "steps to run; 0 (default) runs until SIGTERM/SIGINT");
  run->add_option("--micro-steps", f->w.micro_steps,
                  "llama2-7b: accumulation micro-steps per optimizer step (32)");
  run->add_option("--seq", f->w.seq, "sequence length (llama2-7b 4096, bert-large 128)");
  run->add_option("--tp", f->w.tp, "llama2-7b: tensor-parallel group size (8)");
  run->add_option("--nodes", f->w.nodes,
                  "nodes in the data-parallel job: without a node rank one process, the other "
                  "nodes modelled (llama2-7b; 2); with one, the job's node count");
  run->add_option("--node-rank", f->w.node_rank,
                  "this process is node R of a --nodes job whose every node runs `neuron-sim "
                  "run` (needs NEURON_RT_ROOT_COMM_ID); default: the launcher's GROUP_RANK / "
                  "NODE_RANK with WORLD_SIZE / LOCAL_WORLD_SIZE, or OMPI_COMM_WORLD_RANK / "
                  "OMPI_COMM_WORLD_SIZE")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--scale", f->w.scale,
                  "multiply every op's work and the training workloads' memory (1.0)");
  run->add_option("--batch", f->w.batch, "bert-large: micro-batch per core (16)");
  run->add_option("--accum", f->w.accum, "bert-large: micro-steps per optimizer step (32)");
  run->add_option("--kernels", f->w.kernels,
                  "matmul, empty: executions per core per step (10, 1000)");
  run->add_flag("--estimate", f->w.estimate,
                "load the models, print the timing model's prediction for one step, and exit");
  run->footer(neuron::workloads::WorkloadHelp());

  return {run, [f, run]() -> int {
            f->w.nodes_given = run->count("--nodes") > 0;
            const std::filesystem::path root =
                std::filesystem::absolute(f->root).lexically_normal();
            // The runtime reaches its devices through the driver's device node, so a workload
            // always runs under the simulated driver: re-executed under it when needed.
            if (!neuron::sim::SimDriverLoaded()) {
              // Itself again (/proc/self/exe), under the name it was given: that is the command
              // neuron-ls and neuron-top show for the workload.
              const absl::Status s = neuron::sim::ExecUnderSimDriver(
                  neuron::RootPaths(root), OriginalArgs(), "/proc/self/exe");
              std::cerr << fmt::format("neuron-sim run: {}\n", std::string{s.message()});
              return kExitFailure;
            }
            // The runtime finds the node through NEURON_ROOT (driver-sim/README.md, libnrt-sim).
            setenv("NEURON_ROOT", root.c_str(), 1);
            return neuron::workloads::RunWorkload(f->w, stdout, stderr);
          }};
}

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
  const std::vector<Command> commands{neuron::sim::AddUpCommand(app),
                                      neuron::sim::AddCtlCommand(app, tail),
                                      AddRun(app),
                                      neuron::sim::AddExecCommand(app, tail),
                                      neuron::sim::AddKubeletCommand(app),
                                      neuron::sim::AddPodCommand(app, tail),
                                      neuron::sim::AddPredictCommand(app),
                                      neuron::sim::AddClusterCommand(app),
                                      neuron::sim::AddJobCommand(app),
                                      neuron::sim::AddApiServerCommand(app),
                                      neuron::sim::AddScheduleCommand(app)};
  OriginalArgs().assign(argv, argv + argc);
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

// What nothing below handled (a std::bad_alloc, a filesystem error) ends the command with one
// line and status 1 rather than std::terminate's abort.
int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "neuron-sim: " << e.what() << "\n";
    return 1;
  }
}
