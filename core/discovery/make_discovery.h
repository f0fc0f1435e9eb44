#pragma once
// Which discovery back end reads the node, chosen in one place for every consumer
// (docs/architecture.md#discovery): libudev in production, where ROOT is the host's own "/"; the
// directory scan over ROOT/sys for a simulated node or a container without udev. Both yield the
// same Inventory for the same tree (tests/core/discovery_agreement_test.cc).

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/discovery/inventory.h"

namespace neuron {

enum class DiscoveryMode {
  kAuto,       // libudev when ROOT is "/", else the directory scan
  kDirectory,  // MakeDirectoryDiscovery
  kUdev,       // MakeUdevDiscovery
};

// kDirectory or kUdev: what `mode` means for `root`.
DiscoveryMode ResolveDiscoveryMode(const RootPaths& root, DiscoveryMode mode);

// The back end ResolveDiscoveryMode names. Fails only when libudev cannot be set up.
absl::StatusOr<std::unique_ptr<Discovery>> MakeDiscovery(const RootPaths& root, DiscoveryMode mode,
                                                         DiscoveryOptions options);

}  // namespace neuron
