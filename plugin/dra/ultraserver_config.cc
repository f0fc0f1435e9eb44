#include "plugin/dra/ultraserver_config.h"

#include <algorithm>

#include "core/discovery/ultraserver.h"
#include "fmt/format.h"
#include "fmt/ranges.h"

namespace neuron::plugin::dra {
namespace {

// The init script's values when the node is in no multi-node configuration.
constexpr std::string_view kNoServerId = "0000000000000000";
constexpr int kNoNodeId = -1;

std::vector<std::string> Env(int mode, std::string_view server_id, int node_id) {
  return {fmt::format("NEURON_RT_ULTRASERVER_MODE={}", mode),
          fmt::format("NEURON_RT_ULTRASERVER_SERVER_ID={}", server_id),
          fmt::format("NEURON_RT_ULTRASERVER_NODE_ID={}", node_id)};
}

std::string ModesText(const std::vector<int>& modes) {
  return modes.empty() ? "none" : fmt::format("{}", fmt::join(modes, ","));
}

}  // namespace

absl::StatusOr<std::vector<std::string>> UltraServerEnv(
    const std::optional<UltraServerInfo>& ultraserver, const nlohmann::json& parameters) {
  const auto field = parameters.find("ultraserverMode");
  if (field == parameters.end() || !field->is_number_integer()) {
    return absl::InvalidArgumentError(
        "UltraServerConfig.ultraserverMode is missing or not an integer (1, 2 or 4 nodes)");
  }
  const int64_t nodes = field->get<int64_t>();
  if (nodes != 1 && nodes != 2 && nodes != 4) {
    return absl::InvalidArgumentError(fmt::format(
        "UltraServerConfig.ultraserverMode {} is not 1, 2 or 4 (the nodes the workload spans)",
        nodes));
  }
  if (!ultraserver) {
    return absl::FailedPreconditionError(
        "this node's UltraServer attributes are unknown (no ultraserver_mode, or the driver's "
        "election is in progress)");
  }
  const std::vector<int>& modes = ultraserver->supported_modes;
  auto supports = [&](int mode) {
    return std::find(modes.begin(), modes.end(), mode) != modes.end();
  };
  int mode = kUltraServerModeX1;
  if (nodes == 4) {
    mode = kUltraServerModeX4;
  } else if (nodes == 2) {
    mode = supports(kUltraServerModeX2V) ? kUltraServerModeX2V : kUltraServerModeX2H;
  }
  if (!supports(mode)) {
    return absl::FailedPreconditionError(fmt::format(
        "this node does not support the {}-node UltraServer configuration (its ultraserver_mode "
        "lists {}; {} needs {})",
        nodes, ModesText(modes), nodes, nodes == 2 ? "2 (X2H) or 3 (X2V)" : std::to_string(mode)));
  }
  if (nodes == 1) return Env(mode, kNoServerId, kNoNodeId);
  const auto m = std::find_if(
      ultraserver->memberships.begin(), ultraserver->memberships.end(),
      [&](const UltraServerMembership& x) { return x.size == static_cast<int>(nodes); });
  if (m == ultraserver->memberships.end()) {
    return absl::FailedPreconditionError(fmt::format(
        "this node is in no {}-node UltraServer configuration (node_id_{} is -1 or unreadable)",
        nodes, nodes));
  }
  return Env(mode, m->server_id, m->node_id);
}

}  // namespace neuron::plugin::dra
