#pragma once
// Names and locations in the Neuron driver's sysfs tree, the datastore and the EFA tree
// (docs/driver-interface.md#sysfs-tree, #datastore, #efa). The reader in core and the writer in
// driver-sim share them, so a name is spelled in exactly one place. The names of single files and
// directories are in core/driver/sysfs_files.h, the counter files' in core/driver/counters.h (in
// the driver's table orders), both included here.

#include <array>
#include <filesystem>
#include <string>
#include <string_view>

#include "core/driver/counters.h"
#include "core/driver/sysfs_files.h"

namespace neuron {

// Device state as the `reset` file prints it (docs/driver-interface.md#reset-and-state).
enum class DeviceState { kReset = 0, kReady = 1, kInvalid = 2 };
std::string_view DeviceStateName(DeviceState s);

inline constexpr std::string_view kPciDriverName = "neuron-driver";
inline constexpr std::string_view kNeuronClass = "neuron_device";

// Paths below an injected root (docs/architecture.md#root-convention). No other code spells /sys or
// /dev.
class RootPaths {
 public:
  explicit RootPaths(std::filesystem::path root) : root_(std::move(root)) {}

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path Sys() const { return root_ / "sys"; }
  std::filesystem::path NeuronDevicesDir() const {
    return Sys() / "devices/virtual" / kNeuronClass;
  }
  std::filesystem::path NeuronDevice(int index) const {
    return NeuronDevicesDir() / DeviceName(index);
  }
  std::filesystem::path NeuronClassDir() const { return Sys() / "class" / kNeuronClass; }
  std::filesystem::path PciDevice(std::string_view bdf) const {
    return root_ / "sys/bus/pci/devices" / bdf;
  }
  std::filesystem::path InfinibandClassDir() const {
    return Sys() / "class" / sysfs::kInfinibandClass;
  }
  std::filesystem::path UverbsClassDir() const { return Sys() / "class" / sysfs::kUverbsClass; }
  std::filesystem::path DmiDir() const {
    return Sys() / "class" / sysfs::kDmiSubsystem / sysfs::kDmiSysname;
  }
  // The module's version as MODULE_VERSION gives it ("2.29.0.0\n").
  std::filesystem::path ModuleVersion() const {
    return Sys() / sysfs::part::kModule / sysfs::kModuleName / sysfs::kModuleVersion;
  }
  std::filesystem::path Dev() const { return root_ / "dev"; }
  std::filesystem::path DevNeuron(int index) const { return Dev() / DeviceName(index); }
  std::filesystem::path Kmsg() const { return root_ / "dev/kmsg"; }
  std::filesystem::path Proc() const { return root_ / "proc"; }

 private:
  // "neuronN": the class device's name and its device node's.
  static std::string DeviceName(int index) {
    return std::string(sysfs::kDevicePrefix) + std::to_string(index);
  }

  std::filesystem::path root_;
};

}  // namespace neuron
