#pragma once
// Why a node shows no usable Neuron device, one actionable line per cause
// (docs/tools-ux.md#requirements Q3): the driver is not loaded, it is loaded but has no device, the
// device files cannot be read, or (not fatal for readers of sysfs) the device nodes were not passed
// into the container. Stateless; thread-safe.

#include <string>
#include <vector>

#include "core/discovery/inventory.h"
#include "core/driver/sysfs_names.h"

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

// `inventory` is a scan of the same root, after FillUnreadableFromCatalog: a core_count that
// could not be read is fatal (kPermissionDenied) only when the catalog could not stand in.
PresenceCheck CheckPresence(const RootPaths& root, const Inventory& inventory);

// neuron-ls's and neuron-top's exit code for a presence (top/README.md): 0, 3, 4 or 5.
int PresenceExitCode(DevicePresence presence);

// The driver keeps core_count and connected_devices readable by root only (0400) and reset
// 0600 (docs/driver-interface.md#sysfs-tree), so a normal user's scan has no core count, no
// NeuronLink neighbours and no device state. The tools are for everyone: the instance catalog
// (core/model/catalog.h, by the DMI product_name that discovery read) stands in for the first two.
// Returns one line per attribute saying which file could not be read, why (the errno text) and
// what stands in for it, and removes the inventory warnings those lines replace (one per device
// and file). Nothing happens for attributes that were read.
//
// Temporary home: discovery (core/discovery/inventory.cc) should apply the catalog itself so that
// every consumer agrees (docs/style.md#derive-once); until it does, the tools call this after each
// scan.
std::vector<std::string> FillUnreadableFromCatalog(const RootPaths& root, Inventory* inventory);

}  // namespace neuron
