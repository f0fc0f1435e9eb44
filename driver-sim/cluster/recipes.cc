// The recipes of `neuron-sim job run` (recipes.h). Every value a blueprint sets is taken from it;
// driver-sim/README.md#jobs lists each variable with its source, and
// docs/runtime.md#calibration-workloads the jobs themselves.

#include "driver-sim/cluster/recipes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>

namespace neuron::sim {
namespace {

// Every recipe runs on trn1.32xlarge: one pod per node holding all 16 devices (32 NeuronCores,
// one rank each) and the node's 8 EFA interfaces, as the blueprints request.
constexpr int kRanksPerNode = 32;
constexpr std::string_view kInstance = "trn1.32xlarge";
constexpr std::string_view kNamespace = "training";

std::map<std::string, int> WholeNode() {
  return {{"aws.amazon.com/neuron", 16}, {"vpc.amazonaws.com/efa", 8}};
}

// Where every process of the job meets: torchrun's MASTER_ADDR:MASTER_PORT is node 0's address.
std::map<std::string, std::string> Rendezvous(const JobPlan& job, const NodeSlot& first, int port) {
  return {{"MASTER_ADDR", first.address},
          {"MASTER_PORT", std::to_string(port)},
          {"NEURON_RT_ROOT_COMM_ID", job.comm_id}};
}

// What torchrun sets in a node's agent (and Ray Train's TorchTrainer in its workers) for the
// node's first local rank; the process runs all the node's ranks.
void TorchrunEnv(const JobPlan& job, int node, std::map<std::string, std::string>& env) {
  env["GROUP_RANK"] = std::to_string(node);
  env["NODE_RANK"] = std::to_string(node);
  env["GROUP_WORLD_SIZE"] = std::to_string(job.nodes);
  env["WORLD_SIZE"] = std::to_string(job.world);
  env["LOCAL_WORLD_SIZE"] = std::to_string(kRanksPerNode);
  env["RANK"] = std::to_string(node * kRanksPerNode);
  env["LOCAL_RANK"] = "0";
}

// Open MPI's variables in each process mpirun starts, one process per node (mpirun(1)).
void MpiEnv(const JobPlan& job, int node, std::map<std::string, std::string>& env) {
  env["OMPI_COMM_WORLD_RANK"] = std::to_string(node);
  env["OMPI_COMM_WORLD_SIZE"] = std::to_string(job.nodes);
  env["OMPI_COMM_WORLD_LOCAL_RANK"] = "0";
  env["OMPI_COMM_WORLD_LOCAL_SIZE"] = "1";
  env["OMPI_COMM_WORLD_NODE_RANK"] = std::to_string(node);
}

struct Shape {
  std::string pod_suffix;  // pod i is NAME-SUFFIX-i
  std::string workload;
  std::map<std::string, std::string> env;  // the blueprint's own settings
  std::function<void(const JobPlan&, int, std::map<std::string, std::string>&)> launcher;
};

Shape ShapeOf(std::string_view recipe) {
  if (recipe == "llama2-7b-raytrain") {
    // ray_train_llama2.py of the AI-on-EKS blueprint (docs/runtime.md#calibration-workloads).
    return {"worker",
            "llama2-7b",
            {{"NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS", "3"},
             {"NEURON_RT_STOCHASTIC_ROUNDING_EN", "1"},
             {"NEURON_CC_FLAGS", "--model-type transformer --distribution-strategy=llm-training"}},
            TorchrunEnv};
  }
  if (recipe == "llama2-7b-nemo") return {"worker", "llama2-7b", {}, MpiEnv};
  // dp_bert_hf_pretrain's TorchX AppDef (aws-neuron-eks-samples).
  return {"role1",
          "bert-large",
          {{"FI_PROVIDER", "efa"},
           {"FI_EFA_USE_DEVICE_RDMA", "1"},
           {"FI_EFA_FORK_SAFE", "1"},
           {"NEURON_RT_RESET_CORES", "1"}},
          TorchrunEnv};
}

std::vector<std::string> RunArgs(const std::string& workload, const JobOptions& o) {
  std::vector<std::string> a{"--workload", workload, "--steps", std::to_string(o.steps)};
  const bool bert = workload == "bert-large";
  const bool tp_given =
      std::find(o.shape_args.begin(), o.shape_args.end(), "--tp") != o.shape_args.end();
  if (!bert && !tp_given) a.insert(a.end(), {"--tp", "8"});
  if (o.micro_steps) {
    a.insert(a.end(), {bert ? "--accum" : "--micro-steps", std::to_string(*o.micro_steps)});
  }
  if (o.scale) a.insert(a.end(), {"--scale", fmt::format("{}", *o.scale)});
  if (o.seq) a.insert(a.end(), {"--seq", std::to_string(*o.seq)});
  a.insert(a.end(), o.shape_args.begin(), o.shape_args.end());
  return a;
}

bool IsDnsLabel(std::string_view s) {
  if (s.empty() || s.size() > 40 || s.front() == '-' || s.back() == '-') return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

absl::Status CheckOptions(const Recipe& r, const JobOptions& o, int nodes,
                          const std::vector<NodeSlot>& slots) {
  auto bad = [](const std::string& m) { return absl::InvalidArgumentError(m); };
  if (o.nodes && !r.nodes_choice) {
    return bad(fmt::format("{} runs on {} nodes, as its blueprint does: no --nodes", r.name,
                           r.default_nodes));
  }
  if (nodes < 1) return bad("--nodes must be >= 1");
  if (o.steps < 0 || (o.micro_steps && *o.micro_steps < 1) || (o.seq && *o.seq < 1) ||
      (o.scale && !(*o.scale > 0))) {
    return bad("--steps must be >= 0, --micro-steps and --seq >= 1, --scale > 0");
  }
  if (static_cast<size_t>(nodes) > slots.size()) {
    return bad(
        fmt::format("{} needs {} nodes and the cluster has {}", r.name, nodes, slots.size()));
  }
  for (int i = 0; i < nodes; ++i) {
    const NodeSlot& n = slots[static_cast<size_t>(i)];
    if (n.instance != kInstance) {
      return bad(fmt::format("{} runs on {} nodes and node {} is a {}", r.name, kInstance, n.name,
                             n.instance));
    }
    if (n.address.empty()) return bad(fmt::format("node {} has no address", n.name));
  }
  return absl::OkStatus();
}

}  // namespace

const std::vector<Recipe>& Recipes() {
  static const std::vector<Recipe> kRecipes = {
      {"llama2-7b-raytrain", "Llama-2-7B, Ray Train (torchrun env), TP 8, 2 nodes", 2, false},
      {"llama2-7b-nemo", "Llama-2-7B, MPI operator (Open MPI env), TP 8, 4 nodes", 4, false},
      {"bert-large-torchx", "BERT-Large phase 1, TorchX (torchrun env), data parallel, --nodes", 1,
       true},
  };
  return kRecipes;
}

absl::StatusOr<JobPlan> PlanJob(std::string_view recipe, const JobOptions& options,
                                const std::vector<NodeSlot>& nodes, int port) {
  const auto& all = Recipes();
  const auto it =
      std::find_if(all.begin(), all.end(), [&](const Recipe& r) { return r.name == recipe; });
  if (it == all.end()) {
    std::vector<std::string_view> names;
    names.reserve(all.size());
    for (const Recipe& r : all) names.push_back(r.name);
    return absl::InvalidArgumentError(
        fmt::format("unknown recipe \"{}\" (known: {})", recipe, fmt::join(names, ", ")));
  }
  JobPlan job;
  job.recipe = std::string(it->name);
  job.name = options.name.empty() ? job.recipe : options.name;
  if (!IsDnsLabel(job.name)) {
    return absl::InvalidArgumentError(fmt::format(
        "--name \"{}\": lower-case letters, digits and '-', at most 40 characters", job.name));
  }
  job.nodes = options.nodes.value_or(it->default_nodes);
  if (absl::Status s = CheckOptions(*it, options, job.nodes, nodes); !s.ok()) return s;
  if (port < 1 || port > 65535) {
    return absl::InvalidArgumentError(fmt::format("port {} is not a TCP port", port));
  }
  job.world = job.nodes * kRanksPerNode;
  job.comm_id = fmt::format("{}:{}", nodes.front().address, port);
  const Shape shape = ShapeOf(recipe);
  for (int i = 0; i < job.nodes; ++i) {
    PodPlan pod;
    pod.name = fmt::format("{}-{}-{}", job.name, shape.pod_suffix, i);
    pod.namespace_name = std::string(kNamespace);
    pod.node = static_cast<size_t>(i);
    pod.requests = WholeNode();
    pod.env = shape.env;
    pod.env.merge(Rendezvous(job, nodes.front(), port));
    shape.launcher(job, i, pod.env);
    pod.run_args = RunArgs(shape.workload, options);
    pod.first_rank = i * kRanksPerNode;
    pod.ranks = kRanksPerNode;
    job.pods.push_back(std::move(pod));
  }
  return job;
}

}  // namespace neuron::sim
