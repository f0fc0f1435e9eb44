#pragma once
// AWS's opaque UltraServerConfig on a `neuron-node` claim (aws-neuron-sdk deploy/eks/dra.rst
// "Example 3", deploy/files/specs/4-node-inference-us.yaml):
//   {apiVersion: neuron.aws.com/v1, kind: UltraServerConfig, ultraserverMode: 1|2|4}
// where ultraserverMode is the number of nodes the workload spans. Prepare turns it into the
// Neuron runtime's UltraServer environment, as AWS's init script does
// (aws-neuron-sdk src/k8/k8s-ultraserver-init-script.sh, validate_node_config;
// deploy/eks/ultraserver.rst "How it works"):
//   NEURON_RT_ULTRASERVER_MODE       enum neuron_ultraserver_mode: X4=1, X2H=2, X2V=3, X1=4;
//                                    4 nodes need X4 among the node's modes, 2 nodes take X2V
//                                    when supported else X2H, 1 node is X1
//   NEURON_RT_ULTRASERVER_SERVER_ID  server_id_<N>, "0000000000000000" for 1 node
//   NEURON_RT_ULTRASERVER_NODE_ID    node_id_<N>, -1 for 1 node
// from the driver's class attributes as core reads them (core/discovery/ultraserver.h).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/discovery/inventory.h"
#include "nlohmann/json.hpp"

namespace neuron::plugin::dra {

inline constexpr std::string_view kUltraServerConfigKind = "UltraServerConfig";

// The three "KEY=value" variables for the config's `parameters` on this node. InvalidArgument for
// an ultraserverMode that is missing or not 1, 2 or 4; FailedPrecondition when the node does not
// support that configuration or has no id in it (node_id_<N> is -1), naming which.
absl::StatusOr<std::vector<std::string>> UltraServerEnv(
    const std::optional<UltraServerInfo>& ultraserver, const nlohmann::json& parameters);

}  // namespace neuron::plugin::dra
