#include "driver-sim/workloads/run_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "core/driver/sysfs_names.h"
#include "driver-sim/command.h"
#include "driver-sim/driver/exec.h"
#include "driver-sim/model/job_shape.h"
#include "driver-sim/workloads/workload.h"

namespace neuron::sim {
namespace {

// The command line as the kernel holds it, for re-executing this process under the simulated
// driver with the very same arguments.
std::vector<std::string> OwnCommandLine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  size_t start = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i] != '\0') continue;
    args.push_back(all.substr(start, i - start));
    start = i + 1;
  }
  return args;
}

int Run(const std::string& root_flag, const workloads::WorkloadOptions& w) {
  const std::filesystem::path root = std::filesystem::absolute(root_flag).lexically_normal();
  // The runtime reaches its devices through the driver's device node, so a workload always runs
  // under the simulated driver: re-executed under it when needed.
  if (!SimDriverLoaded()) {
    // Itself again (/proc/self/exe), under the name it was given: that is the command
    // neuron-ls and neuron-top show for the workload.
    const absl::Status s = ExecUnderSimDriver(RootPaths(root), OwnCommandLine(), "/proc/self/exe");
    std::cerr << fmt::format("neuron-sim run: {}\n", std::string{s.message()});
    return 1;
  }
  // The runtime finds the node through NEURON_ROOT (driver-sim/README.md, libnrt-sim).
  setenv("NEURON_ROOT", root.c_str(), 1);
  return workloads::RunWorkload(w, stdout, stderr);
}

}  // namespace

std::pair<CLI::App*, std::function<int()>> AddRunCommand(CLI::App& app) {
  struct Flags {
    std::string root = "/";
    workloads::WorkloadOptions w;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* run = app.add_subcommand(
      "run",
      "run a workload on the simulated node through libnrt-sim, on every core the process is "
      "given (NEURON_RT_VISIBLE_CORES / NEURON_RT_NUM_CORES); SIGTERM or SIGINT stops it cleanly");
  AddRootOption(run, &f->root);
  run->add_option("--workload", f->w.name,
                  fmt::format("workload: {}", fmt::join(workloads::WorkloadNames(), ", ")))
      ->required();
  run->add_option("--steps", f->w.steps, "steps to run; 0 (default) runs until SIGTERM/SIGINT");
  run->add_option("--micro-steps,--accum", f->w.micro_steps,
                  "training: accumulation micro-steps run per optimizer step (the shape's: "
                  "--global-batch / (DP x micro-batch), else 32); fewer is a shorter run");
  // The job shape predict and job run take (job_shape.h); the workloads' defaults: decoders TP 8
  // on 2 nodes with ZeRO-1, bert-large micro-batch 16 on one node.
  workloads::AddShapeFlags(run, &f->w.shape,
                           "nodes in the job: without a node rank one process, the other nodes "
                           "modelled (decoders 2, bert-large 1); with one, the job's node count");
  run->add_option("--node-rank", f->w.node_rank,
                  "this process is node R of a --nodes job whose every node runs `neuron-sim "
                  "run` (needs NEURON_RT_ROOT_COMM_ID); default: the launcher's GROUP_RANK / "
                  "NODE_RANK with WORLD_SIZE / LOCAL_WORLD_SIZE, or OMPI_COMM_WORLD_RANK / "
                  "OMPI_COMM_WORLD_SIZE")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--scale", f->w.scale,
                  "multiply every op's work and the training workloads' memory (1.0)");
  run->add_option("--kernels", f->w.kernels, workloads::KernelsFlagHelp());
  run->add_flag("--estimate", f->w.estimate,
                "load the models, print the timing model's prediction for one step, and exit");
  run->footer(workloads::WorkloadHelp());
  return {run, [f]() { return Run(f->root, f->w); }};
}

}  // namespace neuron::sim
