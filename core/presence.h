#pragma once
// Why a node shows no usable Neuron device, one actionable line per cause (TOOLS-UX.md §4 Q3):
// the driver is not loaded, it is loaded but has no device, the device files cannot be read, or
// (not fatal for readers of sysfs) the device nodes were not passed into the container.
// Stateless; thread-safe.

#include <string>
#include <vector>

#include "core/inventory.h"
#include "core/sysfs_names.h"

namespace neuron {

enum class DevicePresence {
  kPresent,           // at least one device with readable attributes
  kNoDriver,          // ROOT/sys/class/neuron_device does not exist
  kNoDevices,         // the class directory exists but lists no neuronN
  kPermissionDenied,  // the class directory or the devices' root-only files cannot be read
};

struct PresenceCheck {
  DevicePresence presence = DevicePresence::kPresent;
  std::string message;  // empty when kPresent
  // Devices in sysfs whose device node (ROOT/dev/neuronN) is missing: a container started
  // without the devices. Reported beside kPresent as a warning.
  std::vector<int> missing_device_nodes;
  std::string missing_nodes_message;  // empty when none are missing
};

// `inventory` is a scan of the same root.
PresenceCheck CheckPresence(const RootPaths& root, const Inventory& inventory);

}  // namespace neuron
