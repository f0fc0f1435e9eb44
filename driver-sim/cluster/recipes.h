#pragma once
// The jobs `neuron-sim job run` knows (driver-sim/README.md#jobs): each recipe is the pod shape,
// environment and rank layout of a published EKS training job, turned into one `neuron-sim run`
// per node whose cores are that node's ranks of one collective world. Planning is pure: the
// ports and nodes come in, the pods come out. Thread-safe (pure functions).

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace neuron::sim {

// What `job run` was given beside the recipe; unset fields take the recipe's values.
struct JobOptions {
  std::string name;  // empty: the recipe's name
  int steps = 0;     // optimizer steps per pod; 0: until the job is stopped
  std::optional<int> micro_steps;
  std::optional<double> scale;
  std::optional<int> seq;
  std::optional<int> nodes;  // only for recipes whose node count is a choice
  // The job shape's other flags (job_shape.h's ShapeArgs), passed to every pod's run as given.
  std::vector<std::string> shape_args;
};

// A node of the cluster the job may use, in the cluster's order.
struct NodeSlot {
  std::string name;
  std::string address;   // the loopback address its pods' ranks use
  std::string instance;  // instance type, e.g. "trn1.32xlarge"
};

// One pod: where it goes, what it asks the kubelet for, and what its container runs.
struct PodPlan {
  std::string name;
  std::string namespace_name;
  size_t node = 0;  // index into the NodeSlots given to PlanJob
  std::map<std::string, int> requests;
  // The launcher's environment; the device plugin's (NEURON_RT_VISIBLE_CORES, NEURON_ROOT, ...)
  // comes with admission.
  std::map<std::string, std::string> env;
  std::vector<std::string> run_args;  // `neuron-sim run` arguments
  int first_rank = 0;                 // world rank of the pod's first core
  int ranks = 0;
};

struct JobPlan {
  std::string name;
  std::string recipe;
  int nodes = 0;
  int world = 0;        // ranks in the collective world
  std::string comm_id;  // NEURON_RT_ROOT_COMM_ID: MASTER_ADDR:MASTER_PORT
  std::vector<PodPlan> pods;
};

struct Recipe {
  std::string_view name;
  std::string_view summary;
  int default_nodes = 1;
  bool nodes_choice = false;  // --nodes is allowed
};
const std::vector<Recipe>& Recipes();

// The pods of `recipe` on the first nodes of `nodes`, rank 0's process listening on
// nodes[0].address:`port`. InvalidArgument names the flag or node that does not fit: an unknown
// recipe, --nodes for a recipe of fixed size, fewer nodes than the job needs, a node of another
// instance type, a job name that is not a DNS label.
absl::StatusOr<JobPlan> PlanJob(std::string_view recipe, const JobOptions& options,
                                const std::vector<NodeSlot>& nodes, int port);

}  // namespace neuron::sim
