// ResolvePlacement (workload.h): a multi-node job's rank layout from the flags or from the
// environment that the job's launcher sets in each worker.

#include <fmt/format.h>

#include <charconv>
#include <string_view>

#include "driver-sim/workloads/workload.h"

namespace neuron::workloads {
namespace {

absl::StatusOr<std::optional<int>> IntVar(const EnvLookup& env, const char* name, int min) {
  const char* v = env(name);
  if (v == nullptr) return std::optional<int>();
  const std::string_view text(v);
  int n = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || n < min) {
    return absl::InvalidArgumentError(
        fmt::format("{}=\"{}\" is not a whole number >= {}", name, text, min));
  }
  return std::optional<int>(n);
}

// torchrun (and Ray Train's TorchTrainer, which sets the same variables): the node's rank, and
// the world in ranks. Absent: nullopt.
absl::StatusOr<std::optional<NodePlacement>> FromTorchrun(const EnvLookup& env) {
  const char* rank_var = env("GROUP_RANK") != nullptr ? "GROUP_RANK" : "NODE_RANK";
  absl::StatusOr<std::optional<int>> rank = IntVar(env, rank_var, 0);
  if (!rank.ok()) return rank.status();
  if (!*rank) return std::optional<NodePlacement>();
  absl::StatusOr<std::optional<int>> world = IntVar(env, "WORLD_SIZE", 1);
  absl::StatusOr<std::optional<int>> local = IntVar(env, "LOCAL_WORLD_SIZE", 1);
  if (!world.ok()) return world.status();
  if (!local.ok()) return local.status();
  if (!*world || !*local) {
    return absl::InvalidArgumentError(fmt::format(
        "{} is set but WORLD_SIZE and LOCAL_WORLD_SIZE are not both set: the job's node count "
        "is WORLD_SIZE / LOCAL_WORLD_SIZE",
        rank_var));
  }
  if (**world % **local != 0) {
    return absl::InvalidArgumentError(
        fmt::format("WORLD_SIZE={} is not a multiple of LOCAL_WORLD_SIZE={}", **world, **local));
  }
  NodePlacement p;
  p.node_rank = **rank;
  p.nodes = **world / **local;
  p.ranks_per_node = **local;
  p.source = rank_var;
  return std::optional<NodePlacement>(p);
}

// The MPI operator's workers: one process per node.
absl::StatusOr<std::optional<NodePlacement>> FromMpi(const EnvLookup& env) {
  absl::StatusOr<std::optional<int>> rank = IntVar(env, "OMPI_COMM_WORLD_RANK", 0);
  if (!rank.ok()) return rank.status();
  if (!*rank) return std::optional<NodePlacement>();
  absl::StatusOr<std::optional<int>> size = IntVar(env, "OMPI_COMM_WORLD_SIZE", 1);
  if (!size.ok()) return size.status();
  if (!*size) {
    return absl::InvalidArgumentError(
        "OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not");
  }
  NodePlacement p;
  p.node_rank = **rank;
  p.nodes = **size;
  p.source = "OMPI_COMM_WORLD_RANK";
  return std::optional<NodePlacement>(p);
}

}  // namespace

absl::StatusOr<std::optional<NodePlacement>> ResolvePlacement(const WorkloadOptions& options,
                                                              const EnvLookup& env) {
  std::optional<NodePlacement> p;
  if (options.node_rank >= 0) {
    // Without --nodes, the decoders' two-node job.
    p = NodePlacement{options.node_rank, options.shape.nodes.value_or(2), std::nullopt,
                      "--node-rank"};
  } else {
    absl::StatusOr<std::optional<NodePlacement>> found = FromTorchrun(env);
    if (found.ok() && !*found) found = FromMpi(env);
    if (!found.ok()) return found.status();
    p = *found;
    if (p && options.shape.nodes && *options.shape.nodes != p->nodes) {
      return absl::InvalidArgumentError(
          fmt::format("--nodes {} disagrees with the launcher's {} nodes ({})",
                      *options.shape.nodes, p->nodes, p->source));
    }
  }
  if (p && (p->nodes < 1 || p->node_rank >= p->nodes)) {
    return absl::InvalidArgumentError(fmt::format("{}: node rank {} is outside a job of {} node{}",
                                                  p->source, p->node_rank, p->nodes,
                                                  p->nodes == 1 ? "" : "s"));
  }
  return p;
}

}  // namespace neuron::workloads
