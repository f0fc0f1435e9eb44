#pragma once
// Kubelet device IDs (docs/architecture.md#device-ids), the one codec every component uses.
//   aws.amazon.com/neuron, aws.amazon.com/neurondevice: device index in decimal ("5")
//   aws.amazon.com/neuroncore: global logical core index in decimal ("12")
//   vpc.amazonaws.com/efa: the RDMA device name ("rdmap16s27")
// Indices survive replug (the driver keeps the index), so IDs survive the kubelet checkpoint.

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace neuron {

enum class Resource { kNeuron, kNeuronCore, kEfa, kNeuronDevice };

inline constexpr std::string_view kResourceNeuron = "aws.amazon.com/neuron";
inline constexpr std::string_view kResourceNeuronCore = "aws.amazon.com/neuroncore";
inline constexpr std::string_view kResourceEfa = "vpc.amazonaws.com/efa";
inline constexpr std::string_view kResourceNeuronDevice = "aws.amazon.com/neurondevice";

std::string_view ResourceName(Resource r);
absl::StatusOr<Resource> ParseResourceName(std::string_view name);

// The driver's limits (docs/driver-interface.md#device-nodes): device indices are below 64 and a
// device has at most 8 NeuronCores. Indices read from outside are bounded by them, so arithmetic
// on them cannot overflow.
inline constexpr int kMaxDevices = 64;
inline constexpr int kMaxCoresPerDevice = 8;

// Index-based IDs (devices and cores).
std::string IndexId(int index);
// Parses a decimal index ID strictly: digits only, no sign, no leading zeros, below `limit`.
absl::StatusOr<int> ParseIndexId(std::string_view id, int limit);

// EFA IDs are interface names; valid when non-empty and made of [A-Za-z0-9_] (kernel IB names).
absl::Status ValidateEfaId(std::string_view id);

}  // namespace neuron
