#include "driver-sim/driver/ultraserver.h"

#include <fmt/format.h>

#include "core/driver/sysfs_names.h"

namespace neuron::sim {
namespace {

// enum neuron_ultraserver_mode (share/neuron_driver_shared.h).
constexpr int kX4 = 1;
constexpr int kX2H = 2;
constexpr int kX2V = 3;
constexpr int kX1 = 4;

struct Election {
  int nodes;
  int node_id;
  uint64_t serial;
  // Links: bit 0 the vertical pair, bit 1 the horizontal one (the driver's lr_mask); both good.
  unsigned links = 0x3;

  bool Supports(int mode) const {
    switch (mode) {
      case kX4:
        return nodes == 4;
      case kX2V:
        return nodes >= 2 && (links & 0x1) != 0;
      case kX2H:
        return nodes == 2 && (links & 0x2) != 0;
      case kX1:
        return true;
      default:
        return false;
    }
  }
  // The driver's view for node_id_<size>/server_id_<size>.
  int ModeFor(int size) const {
    if (size == 4) return kX4;
    return Supports(kX2H) ? kX2H : Supports(kX2V) ? kX2V : kX1;
  }
  int NodeIdIn(int mode) const {
    if (mode == kX4) return nodes == 4 ? node_id : -1;
    if (mode == kX1) return -1;
    if (nodes != 4) return node_id;
    // On a 4-node UltraServer the 2-node view is X2V (X2H needs exactly 2 nodes): nodes 0 and 1
    // form one pair, 2 and 3 the other.
    constexpr int kVertical[] = {0, 1, 0, 1};
    return kVertical[node_id];
  }
  uint64_t SerialIn(int mode) const {
    if (mode == kX4) return nodes == 4 ? serial : 0;
    if (mode == kX1) return 0;
    if (nodes != 4) return serial;
    // The second X2V pair of a 4-node UltraServer is told apart by serial - 1.
    return node_id >= 2 ? serial - 1 : serial;
  }
};

}  // namespace

absl::Status ValidateUltraServer(const InstanceSpec& spec, const UltraServerPosition& pos) {
  if (spec.ultraserver_instances == 0) {
    return absl::InvalidArgumentError(
        fmt::format("{} is not an UltraServer instance type", spec.name));
  }
  if (pos.nodes != 4 && pos.nodes != 2 && pos.nodes != 1) {
    return absl::InvalidArgumentError(
        fmt::format("an UltraServer election finds 4, 2 or 1 nodes, not {}", pos.nodes));
  }
  if (pos.node_id < 0 || pos.node_id >= pos.nodes) {
    return absl::InvalidArgumentError(
        fmt::format("node id {} is not in 0-{}", pos.node_id, pos.nodes - 1));
  }
  if (pos.server_id <= 1) {
    return absl::InvalidArgumentError("the server id must be above 1 (0 means none)");
  }
  return absl::OkStatus();
}

std::vector<std::pair<std::string, std::string>> UltraServerClassFiles(
    const InstanceSpec& spec, const UltraServerPosition& pos) {
  std::vector<std::pair<std::string, std::string>> files;
  auto node_file = [](int size) { return fmt::format("{}{}", sysfs::kUsNodeIdPrefix, size); };
  auto server_file = [](int size) { return fmt::format("{}{}", sysfs::kUsServerIdPrefix, size); };
  if (spec.ultraserver_instances == 0) {
    // Not an UltraServer instance: the driver's fixed answers.
    for (int size : {2, 4}) files.emplace_back(node_file(size), "-1\n");
    for (int size : {2, 4}) files.emplace_back(server_file(size), "0000000000000000\n");
    files.emplace_back(std::string(sysfs::kUltraserverMode), "\n");
    return files;
  }
  const Election e{pos.nodes, pos.node_id, pos.server_id};
  for (int size : {2, 4}) {
    files.emplace_back(node_file(size), fmt::format("{}\n", e.NodeIdIn(e.ModeFor(size))));
  }
  for (int size : {2, 4}) {
    files.emplace_back(server_file(size), fmt::format("{:016x}\n", e.SerialIn(e.ModeFor(size))));
  }
  std::string modes;
  for (int m = kX4; m <= kX1; ++m) {
    if (e.Supports(m)) modes += (modes.empty() ? "" : ",") + std::to_string(m);
  }
  files.emplace_back(std::string(sysfs::kUltraserverMode), modes + "\n");
  return files;
}

}  // namespace neuron::sim
