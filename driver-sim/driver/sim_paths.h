#pragma once
// The simulator's own files under ROOT/run/neuron/
// (driver-sim/README.md#files-under-root-run-neuron). A real node has none of them, so they are
// named here, in driver-sim, and not in core's RootPaths, which names only what the agent may read.

#include <filesystem>

#include "core/driver/sysfs_names.h"

namespace neuron::sim {

inline std::filesystem::path SimRunDir(const RootPaths& root) { return root.root() / "run/neuron"; }
inline std::filesystem::path NodeJsonPath(const RootPaths& root) {
  return SimRunDir(root) / "node.json";
}
inline std::filesystem::path SimReadyPath(const RootPaths& root) {
  return SimRunDir(root) / "sim.ready";
}
inline std::filesystem::path CtlSocketPath(const RootPaths& root) {
  return SimRunDir(root) / "ctl.sock";
}
inline std::filesystem::path CoreLockDir(const RootPaths& root) {
  return SimRunDir(root) / "cores";
}

}  // namespace neuron::sim
