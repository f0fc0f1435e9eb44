#pragma once
// PCI functions of the simulated tree (driver-sim internal): a Neuron device's or an EFA's
// directory under sys/devices/pci0000:<bus>/ with the standard Linux attributes and the bus and
// driver links, laid out as the kernel does (driver-sim/README.md). Thread-safe (no shared state).

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "core/driver/sysfs_names.h"
#include "core/model/catalog.h"

namespace neuron::sim {

// One PCI function to lay out.
struct PciFunction {
  std::string bdf;
  uint16_t device;
  int cls;
  int numa_node;
  std::string cpulist;
  int vcpus;
  std::string_view driver;
};

// The function's directory, its attributes and its bus and driver links.
absl::Status WritePciFunction(const RootPaths& root, const PciFunction& f);
absl::Status RemovePciFunction(const RootPaths& root, std::string_view bdf,
                               std::string_view driver);

// Every CPU of the NUMA node, from the Neuron devices placed on it (EFA placements carry only
// the node); all CPUs when no device shares it.
std::string CpusOfNode(const InstanceSpec& spec, int numa);

}  // namespace neuron::sim
