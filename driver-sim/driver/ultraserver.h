#pragma once
// The UltraServer class attributes the simulated driver writes under
// ROOT/sys/class/neuron_device/ (docs/driver-interface.md#device-nodes): on an instance type of an
// UltraServer (InstanceSpec::ultraserver_instances), what aws-neuron-driver 2.24.7 prints once its
// election has found the node's peers (v3/neuron_pelect.c:1250-1410 and 1700-1768, links on both
// sides good); elsewhere the values of a node outside any UltraServer
// (v3/neuron_dhal_v3.c:1983-2020).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/model/catalog.h"

namespace neuron::sim {

// The node's place as the election left it (`neuron-sim up --ultraserver-*`).
struct UltraServerPosition {
  int nodes = 4;    // instances the election found: 4, 2 or 1 (no peer)
  int node_id = 0;  // 0 .. nodes-1
  // The UltraServer's serial (the driver's pod_serial_num); made up, the same on every node of
  // one simulated UltraServer unless given.
  uint64_t server_id = 0x0123456789abcdefULL;
};

// InvalidArgument when `pos` is not a place on `spec` (node id out of range, server id 0 or 1:
// the driver prints id - 1 for half of the nodes in the 2-node view, and 0 means "none").
absl::Status ValidateUltraServer(const InstanceSpec& spec, const UltraServerPosition& pos);

// The five class files, (name, content with its newline), in the driver's registration order.
std::vector<std::pair<std::string, std::string>> UltraServerClassFiles(
    const InstanceSpec& spec, const UltraServerPosition& pos);

}  // namespace neuron::sim
