#include "core/discovery/make_discovery.h"

namespace neuron {

DiscoveryMode ResolveDiscoveryMode(const RootPaths& root, DiscoveryMode mode) {
  if (mode != DiscoveryMode::kAuto) return mode;
  // libudev sees the host's /sys whatever ROOT says: only with ROOT "/" is that the same node.
  return root.root() == "/" ? DiscoveryMode::kUdev : DiscoveryMode::kDirectory;
}

absl::StatusOr<std::unique_ptr<Discovery>> MakeDiscovery(const RootPaths& root, DiscoveryMode mode,
                                                         DiscoveryOptions options) {
  if (ResolveDiscoveryMode(root, mode) == DiscoveryMode::kUdev) {
    return MakeUdevDiscovery(root, std::move(options));
  }
  return MakeDirectoryDiscovery(root, std::move(options));
}

}  // namespace neuron
