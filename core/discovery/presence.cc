#include "core/discovery/presence.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/base/unique_fd.h"
#include "core/discovery/internal/discovery_internal.h"

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
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  return fd.valid() ? 0 : errno;
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

// Devices whose root-only `attribute` discovery could not read: the first file and its errno.
struct Unreadable {
  std::string_view attribute;
  std::vector<int> devices;
  std::filesystem::path first;
  int err = 0;
};

Unreadable FindUnreadable(const RootPaths& root, const Inventory& inv, std::string_view attribute,
                          bool (*missing)(const NeuronDevice&)) {
  Unreadable u{attribute, {}, {}, 0};
  for (const NeuronDevice& d : inv.devices) {
    if (!missing(d)) continue;
    const std::filesystem::path path =
        root.NeuronClassDir() / fmt::format("{}{}", sysfs::kDevicePrefix, d.index) / attribute;
    const int err = OpenErrno(path);
    // 0: read but malformed, which discovery's own warning names; ENOENT: absent, not denied.
    if (err == 0 || err == ENOENT) continue;
    if (u.devices.empty()) {
      u.first = path;
      u.err = err;
    }
    u.devices.push_back(d.index);
  }
  return u;
}

// "cannot read ROOT/.../neuron0/core_count (and neuron1-15's): Permission denied (root only)".
std::string CannotRead(const Unreadable& u) {
  std::string others;
  if (u.devices.size() > 1) {
    others = fmt::format(" (and neuron{}'s)",
                         Ranges(std::vector<int>(u.devices.begin() + 1, u.devices.end())));
  }
  const bool denied = u.err == EACCES || u.err == EPERM;
  return fmt::format("cannot read {}{}: {}{}", u.first.string(), others, std::strerror(u.err),
                     denied ? " (the driver makes it readable by root only)" : "");
}

// The inventory's per-device warnings about the files a note now covers.
void DropWarnings(const Unreadable& u, Inventory* inv) {
  std::erase_if(inv->warnings, [&u](const std::string& w) {
    return std::any_of(u.devices.begin(), u.devices.end(), [&](int d) {
      return w.find(fmt::format("{}{}/{}:", sysfs::kDevicePrefix, d, u.attribute)) !=
             std::string::npos;
    });
  });
}

}  // namespace

int PresenceExitCode(DevicePresence presence) {
  switch (presence) {
    case DevicePresence::kNoDriver:
      return 3;
    case DevicePresence::kNoDevices:
      return 4;
    case DevicePresence::kPermissionDenied:
      return 5;
    case DevicePresence::kPresent:
      break;
  }
  return 0;
}

std::vector<std::string> FillUnreadableFromCatalog(const RootPaths& root, Inventory* inv) {
  std::vector<std::string> notes;
  const InstanceSpec* spec = inv->Spec();
  const Unreadable cores = FindUnreadable(
      root, *inv, sysfs::kCoreCount, [](const NeuronDevice& d) { return d.physical_cores == 0; });
  if (!cores.devices.empty() && spec != nullptr) {
    for (NeuronDevice& d : inv->devices) {
      if (d.physical_cores == 0) d.physical_cores = spec->chip->physical_cores;
    }
    notes.push_back(
        fmt::format("{}; NeuronCore counts come from the instance catalog ({}: {} "
                    "physical cores per device)",
                    CannotRead(cores), spec->name, spec->chip->physical_cores));
    DropWarnings(cores, inv);
  }
  const Unreadable links =
      FindUnreadable(root, *inv, sysfs::kConnectedDevices,
                     [](const NeuronDevice& d) { return d.connected.empty(); });
  if (!links.devices.empty()) {
    for (NeuronDevice& d : inv->devices) {
      if (spec != nullptr && d.connected.empty() && d.index < spec->devices) {
        d.connected = ConnectedDevices(*spec, d.index);
      }
    }
    notes.push_back(spec != nullptr ? fmt::format("{}; NeuronLink neighbours come from the "
                                                  "instance catalog ({})",
                                                  CannotRead(links), spec->name)
                                    : CannotRead(links) + "; NeuronLink neighbours unknown");
    DropWarnings(links, inv);
  }
  const Unreadable state = FindUnreadable(
      root, *inv, sysfs::kReset, [](const NeuronDevice& d) { return !d.state.has_value(); });
  if (!state.devices.empty()) {
    notes.push_back(CannotRead(state) + "; device state unknown");
    DropWarnings(state, inv);
  }
  return notes;
}

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
  // core_count and connected_devices are 0400 (docs/driver-interface.md#sysfs-tree): unreadable
  // unless root.
  const int index = inventory.devices.empty() ? entries.front() : inventory.devices.front().index;
  const std::filesystem::path core_count = root.NeuronDevice(index) / sysfs::kCoreCount;
  const int open_err = OpenErrno(core_count);
  const bool no_cores = inventory.devices.empty() || inventory.devices.front().physical_cores == 0;
  if ((open_err == EACCES || open_err == EPERM) && no_cores) {
    c.presence = DevicePresence::kPermissionDenied;
    c.message = fmt::format(
        "permission denied reading {} ({} is readable by root only) and the instance type "
        "\"{}\" (DMI {}) is not in the catalog to stand in for it: run as root",
        core_count.string(), sysfs::kCoreCount, inventory.instance_type, sysfs::kDmiProductName);
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
