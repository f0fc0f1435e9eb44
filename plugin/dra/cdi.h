#pragma once
// CDI specs for prepared claims (docs/kubelet-api.md#dra-cdi): one file per claim,
// <cdi-dir>/aws.amazon.com-neuron_<claim-uid>.json, kind aws.amazon.com/neuron, one CDI device
// per allocated device named <claim-uid>-<device-name>, whose container edits are
//   Neuron device: deviceNodes /dev/neuronN, env NEURON_RT_VISIBLE_CORES (the claim's cores);
//   NeuronCore:    the device node of its device, the same env;
//   neuron-node:   every device node of the node, the same env (all cores) and, with an
//                  UltraServerConfig, NEURON_RT_ULTRASERVER_{MODE,SERVER_ID,NODE_ID};
//   EFA:           deviceNodes /dev/infiniband/uverbsN.
// The container runtime applies them; the kubelet passes on the ids we answer. Written
// atomically (checkpoint.h's WriteFileAtomic): a runtime never reads half a spec.

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace neuron::plugin::dra {

inline constexpr std::string_view kCdiKind = "aws.amazon.com/neuron";
// The CDI spec version our edits need (deviceNodes and env exist since 0.3.0; 0.6.0 is what
// container runtimes of Kubernetes 1.34's era read).
inline constexpr std::string_view kCdiVersion = "0.6.0";

struct CdiDevice {
  std::string name;                       // the slice's device name: "neuron-3"
  std::vector<std::string> device_nodes;  // host paths, the same inside the container
  std::vector<std::string> env;           // "KEY=value"
};

// "aws.amazon.com/neuron=<uid>-<device>".
std::string CdiId(std::string_view claim_uid, std::string_view device);
std::filesystem::path CdiSpecPath(const std::filesystem::path& dir, std::string_view claim_uid);

// Writes the claim's spec (replacing an older one) and returns each device's CDI id, in order.
absl::StatusOr<std::vector<std::string>> WriteCdiSpec(const std::filesystem::path& dir,
                                                      std::string_view claim_uid,
                                                      const std::vector<CdiDevice>& devices);
// Removes the claim's spec; a missing one is fine.
absl::Status RemoveCdiSpec(const std::filesystem::path& dir, std::string_view claim_uid);

}  // namespace neuron::plugin::dra
