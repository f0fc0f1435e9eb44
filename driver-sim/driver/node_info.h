#pragma once
// ROOT/run/neuron/node.json: the simulated node's shape as the simulator's own parts (the daemon
// restarting on a stale root, libnrt-sim's node model) read it: instance type and id, node name,
// LNC and the device index to PCI address map. Simulator-private: the agent never reads it (it
// reads DMI, `--lnc`, and DEVICE_BDF_EXT, as on a real node; docs/architecture.md#device-abi).
// driver-sim/README.md documents the format field by field.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/driver/sysfs_names.h"

namespace neuron {

struct NodeInfo {
  std::string instance_type;            // "trn1.32xlarge"
  std::string instance_id;              // "i-0123456789abcdef0"
  std::string node_name;                // Kubernetes node name the simulator was given
  int lnc = 1;                          // logical NeuronCore config (1 or 2)
  std::vector<std::string> device_bdf;  // indexed by device index: "0000:10:1c.0"
};

std::string NodeInfoToJson(const NodeInfo& info);
// `source` names the file in errors.
absl::StatusOr<NodeInfo> ParseNodeInfo(std::string_view json, std::string_view source);
// NotFound when the file is absent (a real node without the simulator).
absl::StatusOr<NodeInfo> ReadNodeInfo(const RootPaths& paths);

}  // namespace neuron
