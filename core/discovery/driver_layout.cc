// The driver's generation and each device's sysfs layout (docs/driver-interface.md#detection),
// checked once per scan so that no sample or scrape spends a read on it.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/base/file_io.h"
#include "core/base/unique_fd.h"
#include "core/discovery/internal/discovery_internal.h"

namespace neuron::discovery_internal {
namespace {

bool Exists(int dir_fd, const std::string& rel) {
  return ::faccessat(dir_fd, rel.c_str(), F_OK, 0) == 0;
}

// Which read groups the device's tree holds (a group counts when its first file exists), and
// which of the files the agent reads that `expected` promises it lacks; from `cache` when the
// device's directory is the one checked before.
void CheckDevice(const RootPaths& root, NodeGroups expected, LayoutCache* cache,
                 NeuronDevice* dev) {
  dev->sysfs_groups = {};
  dev->missing_nodes.clear();
  const UniqueFd fd(
      ::open(root.NeuronDevice(dev->index).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  struct stat st {};
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0) return;  // vanished: the next scan drops it
  LayoutCache::Entry& e = cache->devices[dev->index];
  if (e.dev != st.st_dev || e.ino != st.st_ino || e.expected != expected ||
      e.cores != dev->physical_cores) {
    e = {st.st_dev, st.st_ino, expected, dev->physical_cores, {}, {}};
    for (int i = 0; i < kNodeGroupCount; ++i) {
      const auto g = static_cast<NodeGroup>(i);
      const auto files = GroupDeviceFiles(g);
      if (kReadGroups.Has(g) && !files.empty() && Exists(fd.get(), files.front())) e.groups.Add(g);
    }
    for (const std::string& rel : ReadDeviceFiles(expected, dev->physical_cores)) {
      if (!Exists(fd.get(), rel)) e.missing.push_back(rel);
    }
  }
  dev->sysfs_groups = e.groups;
  dev->missing_nodes = e.missing;
}

}  // namespace

void ReadDriverLayout(const RootPaths& root, Inventory* inv, LayoutCache* cache) {
  inv->driver = DriverInfo{};
  absl::StatusOr<std::string> version = ReadText(root.ModuleVersion());
  if (version.ok()) {
    inv->driver.version = *version;
    inv->driver.generation = GenerationOfVersion(*version);
  } else if (!absl::IsNotFound(version.status())) {
    inv->warnings.push_back(std::string{version.status().message()});
  }
  const NodeGroups promised = inv->driver.Expected().groups;
  std::map<int, LayoutCache::Entry> seen;
  for (NeuronDevice& d : inv->devices) {
    CheckDevice(root, GroupsOnChip(promised, d.instance_type), cache, &d);
    if (auto it = cache->devices.find(d.index); it != cache->devices.end()) seen.insert(*it);
  }
  cache->devices = std::move(seen);  // forget devices that went away
}

}  // namespace neuron::discovery_internal
