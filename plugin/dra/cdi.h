#pragma once
// CDI specs for prepared claims (docs/kubelet-api.md#dra-cdi): one file per claim and driver,
// <cdi-dir>/aws.amazon.com-neuron_<claim-uid>.json, kind aws.amazon.com/neuron, for
// neuron.aws.com's devices and <cdi-dir>/aws.amazon.com-efa_<claim-uid>.json, kind
// aws.amazon.com/efa, for efa.neuron.aws.com's (a claim may hold devices of both, and each driver
// prepares and unprepares its own), one CDI device per allocated device named
// <claim-uid>-<device-name>, whose container edits are
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
inline constexpr std::string_view kEfaCdiKind = "aws.amazon.com/efa";
// The CDI kind of a driver's specs (device_kinds.h's kDriverNames).
std::string_view CdiKindOf(std::string_view driver);
// The CDI spec version our edits need (deviceNodes and env exist since 0.3.0; 0.6.0 is what
// container runtimes of Kubernetes 1.34's era read).
inline constexpr std::string_view kCdiVersion = "0.6.0";

struct CdiDevice {
  std::string name;                       // the slice's device name: "neuron-3"
  std::vector<std::string> device_nodes;  // host paths, the same inside the container
  std::vector<std::string> env;           // "KEY=value"
};

// Where a claim's specs go, and of which kind.
struct CdiSpecs {
  std::filesystem::path dir;         // --cdi-dir
  std::string_view kind = kCdiKind;  // CdiKindOf(the driver)
};

// "aws.amazon.com/neuron=<uid>-<device>".
std::string CdiId(std::string_view kind, std::string_view claim_uid, std::string_view device);
std::filesystem::path CdiSpecPath(const CdiSpecs& specs, std::string_view claim_uid);

// Writes the claim's spec (replacing an older one) and returns each device's CDI id, in order.
absl::StatusOr<std::vector<std::string>> WriteCdiSpec(const CdiSpecs& specs,
                                                      std::string_view claim_uid,
                                                      const std::vector<CdiDevice>& devices);
// Removes the claim's spec; a missing one is fine.
absl::Status RemoveCdiSpec(const CdiSpecs& specs, std::string_view claim_uid);

}  // namespace neuron::plugin::dra
