#pragma once
// Workloads that `neuron-sim run` runs on a simulated node through libnrt-sim
// (docs/architecture.md#driver-sim, docs/runtime.md#calibration-workloads): each uses every core
// the process was given (NEURON_RT_VISIBLE_CORES / NEURON_RT_NUM_CORES), one thread per logical
// core, prints one progress line per step, and on SIGTERM or SIGINT finishes the step under way on
// every core, calls nrt_close and returns 0. driver-sim/README.md#workloads documents each
// workload's model and calibration.
//
//   the single-kernel workloads, one row each in kernels.cc: matmul (the calibration GEMM,
//               docs/hardware.md#calibration-points row 1) and empty (the runtime's own cost per
//               execution) among them
//   llama2-7b, llama2-13b, llama3.1-8b, gpt3-6.7b
//               a decoder's training step generated from its architecture
//               (driver-sim/README.md#training-model): TP groups, ZeRO-1 over the data-parallel
//               ranks here and on the modelled peers of other nodes, gradient accumulation
//   bert-large  BERT-Large phase 1, data parallel on every core, micro-batch 16, seq 128
//
// Thread-safety: RunWorkload runs one workload at a time per process (the runtime is
// process-wide); it installs SIGTERM and SIGINT handlers for its duration.

#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "driver-sim/model/job_shape.h"

namespace neuron::workloads {

struct WorkloadOptions {
  std::string name;
  int steps = 0;  // 0: until SIGTERM/SIGINT
  // Training: the job's shape (job_shape.h, the flags predict takes); unset fields take the
  // workload's own (decoders TP 8, 2 nodes, micro-batch 1, ZeRO-1; bert-large TP 1, 1 node,
  // micro-batch 16).
  JobShapeFlags shape;
  // Training: accumulation micro-steps run per optimizer step; unset: the shape's
  // (--global-batch / (DP x micro-batch)), else 32. Fewer than the shape's is a shorter run.
  std::optional<int> micro_steps;
  // This process's node in a job whose every node runs its own `neuron-sim run` (the peers are
  // real processes sharing NEURON_RT_ROOT_COMM_ID); -1: from the launcher's environment, and
  // without one, a single process with the other nodes modelled (ResolvePlacement).
  int node_rank = -1;
  double scale = 1.0;  // multiplies every op's work (compute, traffic, collective bytes)
  // matmul and empty: executions per core per step (0: the workload's own)
  int kernels = 0;
  // Load the models, print what the timing model predicts for one step (nrtsim's estimates,
  // without waiting for peers) and exit without executing.
  bool estimate = false;
};

// Where a process sits in a multi-node job (driver-sim/README.md#workloads).
struct NodePlacement {
  int node_rank = 0;
  int nodes = 1;
  std::optional<int> ranks_per_node;  // LOCAL_WORLD_SIZE, when the launcher set it
  std::string source;                 // what said so: "--node-rank", "GROUP_RANK", ...
};
// Returns the value of an environment variable or nullptr (std::getenv in production).
using EnvLookup = std::function<const char*(const char*)>;
// The process's node from --node-rank (with --nodes), else from the launcher's environment:
// torchrun's GROUP_RANK (or NODE_RANK) with WORLD_SIZE / LOCAL_WORLD_SIZE nodes, or the MPI
// operator's OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE (one worker process per node).
// nullopt: neither, the single-process job with modelled peers. InvalidArgument names the
// variable or flag that is malformed or disagrees with another.
absl::StatusOr<std::optional<NodePlacement>> ResolvePlacement(const WorkloadOptions& options,
                                                              const EnvLookup& env);

// Names of the workloads, for --help and error messages.
std::vector<std::string_view> WorkloadNames();
// --kernels' help: the single-kernel workloads and their defaults.
std::string KernelsFlagHelp();
// One paragraph per workload and option, for `neuron-sim run --help`.
std::string WorkloadHelp();

// Runs the workload in this process: nrt_init, one thread per visible core, nrt_close. Progress
// goes to `out`, errors to `err`. Returns 0 when every step ran or a signal stopped the job,
// 1 on a runtime failure (the message names the core and the status), 2 on bad options.
int RunWorkload(const WorkloadOptions& options, std::FILE* out, std::FILE* err);

}  // namespace neuron::workloads
