#include "core/presence.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/discovery_internal.h"

namespace neuron {
namespace {

// Indices of the neuronN entries of the class directory; errno of opendir in *err.
std::vector<int> ClassEntries(const std::filesystem::path& dir, int* err) {
  std::vector<int> out;
  *err = 0;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    *err = errno;
    return out;
  }
  while (const dirent* e = ::readdir(d)) {
    if (std::optional<int> n = discovery_internal::NeuronIndex(e->d_name)) out.push_back(*n);
  }
  ::closedir(d);
  return out;
}

// errno of opening `path` for reading, 0 when it opens.
int OpenErrno(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  ::close(fd);
  return 0;
}

std::string Ranges(const std::vector<int>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += j == i ? fmt::format("{}", ids[i]) : fmt::format("{}-{}", ids[i], ids[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace

PresenceCheck CheckPresence(const RootPaths& root, const Inventory& inventory) {
  PresenceCheck c;
  const std::filesystem::path class_dir = root.NeuronClassDir();
  int err = 0;
  const std::vector<int> entries = ClassEntries(class_dir, &err);
  if (err == ENOENT || err == ENOTDIR) {
    c.presence = DevicePresence::kNoDriver;
    c.message = fmt::format(
        "no Neuron driver: {} does not exist. Install aws-neuronx-dkms and load the neuron "
        "module, or point --root at a node's (or a simulated node's) root",
        class_dir.string());
    return c;
  }
  if (err == EACCES || err == EPERM) {
    c.presence = DevicePresence::kPermissionDenied;
    c.message = fmt::format("permission denied reading {}", class_dir.string());
    return c;
  }
  if (err != 0 || entries.empty()) {
    c.presence = DevicePresence::kNoDevices;
    c.message =
        fmt::format("the Neuron driver is loaded but lists no device in {}{}", class_dir.string(),
                    err != 0 ? fmt::format(" ({})", std::strerror(err)) : std::string());
    return c;
  }
  // core_count and connected_devices are 0400 (DRIVER-INTERFACE §2): unreadable unless root.
  const int index = inventory.devices.empty() ? entries.front() : inventory.devices.front().index;
  const std::filesystem::path core_count = root.NeuronDevice(index) / "core_count";
  const int open_err = OpenErrno(core_count);
  if (open_err == EACCES || open_err == EPERM) {
    c.presence = DevicePresence::kPermissionDenied;
    c.message = fmt::format(
        "permission denied reading {} (core_count and connected_devices are readable by root "
        "only): run as root",
        core_count.string());
    return c;
  }
  if (inventory.devices.empty()) {
    c.presence = DevicePresence::kNoDevices;
    c.message = fmt::format("{} lists devices but none could be read", class_dir.string());
    return c;
  }
  for (const NeuronDevice& d : inventory.devices) {
    if (::access(root.DevNeuron(d.index).c_str(), F_OK) != 0) {
      c.missing_device_nodes.push_back(d.index);
    }
  }
  if (!c.missing_device_nodes.empty()) {
    c.missing_nodes_message = fmt::format(
        "device nodes missing under {} for neuron{}: in a container, pass the devices in (e.g. "
        "request aws.amazon.com/neuron) so runtimes can use them",
        root.Dev().string(), Ranges(c.missing_device_nodes));
  }
  return c;
}

}  // namespace neuron
