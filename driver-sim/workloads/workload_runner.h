#pragma once
// Internal to the workloads: the pieces every workload shares. A Workload describes its models
// and steps; RunWorkload (workload.h) runs it: one thread per visible logical core, all cores
// step together (a barrier after every step, where the progress line is printed and the decision
// to stop is taken once for all, so no core enters a collective its peers will never join).
// Named for the runner, not "job": a job is driver-sim/cluster/'s multi-node runner, which starts
// one such run per node.
//
// Thread-safety: a Workload's Setup/Step/Teardown run on the core's own thread and may touch
// only that core's CoreContext; Report and Plan run on one thread while every core waits.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "driver-sim/workloads/workload.h"
#include "nrt/nrt.h"
#include "nrt/nrtsim.h"

namespace neuron::workloads {

// What every workload learns about the process's cores before it starts.
struct RunInfo {
  uint32_t cores = 0;    // visible logical cores (the world of in-process collectives)
  uint32_t lnc = 1;      // physical cores per logical core
  std::string instance;  // instance family and size as the runtime reports them
  bool has_efa = false;  // the node has EFA interfaces
  // A multi-process job (ResolvePlacement): this process's node and the job's node count; the
  // cores are world ranks node_rank · cores + vnc. -1 and 1 for a single process.
  int node_rank = -1;
  int nodes = 1;
};

// One logical core's thread state.
struct CoreContext {
  uint32_t vnc = 0;   // logical core in the process
  uint32_t rank = 0;  // collective world rank: vnc, or node_rank · cores + vnc (RunInfo)
  nrtsim_core_info_t info{};
  std::vector<nrt_model_t*> models;
  std::vector<nrt_tensor_t*> tensors;
  nrt_tensor_set_t* inputs = nullptr;
  nrt_tensor_set_t* outputs = nullptr;
  // Per step: what the workload measured (kernel times, tokens, ...) and the first failure.
  std::vector<double> kernel_seconds;
  double units = 0;         // work done this step (sequences, tokens, kernels)
  double sync_seconds = 0;  // time in the step's closing phase (gradient all-reduce)
  NRT_STATUS status = NRT_SUCCESS;
  std::string failure;  // set with a non-success status: what failed, for the error message
  bool nan = false;     // an execution completed with NaN results this step
};

class Workload {
 public:
  virtual ~Workload() = default;
  // Checks the options against the cores; InvalidArgument is a usage error (exit 2).
  virtual absl::Status Configure(const RunInfo& info) = 0;
  // One line saying what will run (printed before the first step).
  virtual std::string Banner() const = 0;
  // Loads models and allocates tensors for one core. Runs on the core's thread.
  virtual absl::Status Setup(CoreContext& core) = 0;
  // A step is this many phases, each followed by a barrier of all cores (llama2-7b: its
  // micro-steps, then the optimizer phase), so a signal stops the job within one phase.
  virtual int Phases() const { return 1; }
  // Runs phase `phase` (from 0) of step `step` (from 1) on one core; records failures in
  // core.status / core.failure.
  virtual void Step(CoreContext& core, int step, int phase) = 0;
  // What the timing model predicts for one step (--estimate), from core 0's models.
  virtual std::string Estimate(const CoreContext& core) const = 0;
  // The progress line of step `step`, which took `seconds` of wall time on all cores.
  virtual std::string Report(int step, int steps, double seconds,
                             std::span<const CoreContext> cores) = 0;
};

// llama2-7b, llama2-13b, llama3.1-8b, gpt3-6.7b, bert-large (o.name picks the model).
std::unique_ptr<Workload> MakeTraining(const WorkloadOptions& o);
// The single-kernel workloads (kernels.cc): their names, the one called `name` (null when none
// is), and their lines of WorkloadHelp.
std::vector<std::string_view> KernelWorkloadNames();
std::unique_ptr<Workload> MakeKernelWorkload(std::string_view name, const WorkloadOptions& o);
std::string KernelWorkloadHelp();

// ---- Helpers for workloads ----

// Builds the NEFF of an op list and loads it on `core` (as rank core.rank of a world of `world`
// ranks when `world` > 0, i.e. with nrt_load_collectives). The model is kept in core.models.
absl::StatusOr<nrt_model_t*> LoadOpList(CoreContext& core, const std::string& op_list,
                                        const std::string& name, uint32_t world = 0);
// Creates the core's (empty) input and output tensor sets and one device tensor of `bytes` in
// the core's HBM (the job's small live state: the tensors category in sysfs).
absl::Status PrepareCore(CoreContext& core, size_t bytes);
// Runs the model once with the core's tensor sets and records the outcome: NaN results set
// core.nan (the step goes on); any other failure sets core.status and core.failure. Returns
// the execution's wall time in seconds, or nullopt when it failed.
std::optional<double> Execute(CoreContext& core, nrt_model_t* model, std::string_view what);
// "NRT_TIMEOUT (5)".
std::string StatusText(NRT_STATUS s);
// nrtsim_get_model_estimate of `model` in seconds (0 when it fails).
double EstimateSeconds(const nrt_model_t* model);
// Median of `v` (0 when empty).
double Median(std::vector<double> v);

}  // namespace neuron::workloads
