#pragma once
// `neuron-sim job run|delete|list` on a simulated cluster (driver-sim/README.md#jobs): a recipe's
// pods admitted all or none through each node's kubelet emulator (the real device plugin's
// Allocate behind it), one `neuron-sim run` per pod under its node's simulated driver, the pods'
// step lines summed into the job's throughput, and every pod deleted when one fails or the job
// is stopped. DIR/jobs/NAME/ holds job.json (the pods and their nodes) and one log per pod.
// Exit codes: 0 every pod exited 0, 1 a refusal or a failed pod, 2 usage.
// Thread-safety: RunJob owns the process's signals while it runs (one job per process); the
// other functions are thread-safe.

#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "driver-sim/cluster/recipes.h"

namespace neuron::sim {

struct JobRunRequest {
  std::filesystem::path cluster_dir;
  std::string recipe;
  JobOptions options;
  int timeout_seconds = 0;        // 0: none; else every pod is deleted after this long
  int grace_period_seconds = 30;  // a stopped pod's SIGTERM-to-SIGKILL time
};

// Admits every pod of the job or none (a refusal deletes those admitted and names the node and
// the kubelet's reason), starts the pods, prints one job-wide line per step once every pod has
// reported it, and on the first failed pod (or SIGTERM/SIGINT, or the timeout) deletes the rest.
// Returns the exit code. Blocks SIGTERM, SIGINT and SIGCHLD for good.
int RunJob(const JobRunRequest& request, std::ostream& out, std::ostream& err);
// Deletes every pod job.json records, from its node's kubelet; a pod already gone is success.
int DeleteJob(const std::filesystem::path& cluster_dir, const std::string& name,
              int grace_period_seconds, std::ostream& out, std::ostream& err);
// One line per job recorded in DIR/jobs: name, recipe, and its pods with their nodes.
int ListJobs(const std::filesystem::path& cluster_dir, std::ostream& out, std::ostream& err);

// ---- Pieces of RunJob, public for tests ----

// The figures of a `neuron-sim run` step line ("step 2/5  step_time 1.234 s  seq/s 6.2 (...)
// tokens/s 25395 (node 0 of 2) ..."); nullopt for any other line.
struct StepFigures {
  int step = 0;
  double step_time = 0;
  std::optional<double> seq_per_s;
  std::optional<double> tokens_per_s;
};
std::optional<StepFigures> ParseStepLine(std::string_view line);

// Collects the pods' step lines; a step's job-wide line is ready once every pod reported it.
// Not thread-safe.
class StepTally {
 public:
  explicit StepTally(size_t pods) : pods_(pods) {}
  // Records pod `pod`'s figures; returns the job's line when this completes a step.
  std::optional<std::string> Add(size_t pod, const StepFigures& f, int steps);

 private:
  struct Pending {
    std::vector<std::optional<StepFigures>> pods;
    size_t reported = 0;
  };
  size_t pods_;
  std::vector<std::pair<int, Pending>> pending_;  // by step
};

}  // namespace neuron::sim
