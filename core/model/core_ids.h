#pragma once
// Global logical NeuronCore ids: the numbering NEURON_RT_VISIBLE_CORES uses, which neuron-ls,
// neuron-top, the exporter's `neuroncore` label and the device plugin's neuroncore resource all
// print (docs/runtime.md#reservation-and-indices). Logical core k of device d is
// d * cores_per_device + k, cores_per_device being the logical cores per device at the LNC in
// force (Inventory::LogicalCoresPerDevice). Ids stay stable across a neighbour's unplug, like
// device indices. One definition here, so no two tools can number a core differently
// (docs/style.md#derive-once).
//
// A cores_per_device below 1 (an inventory that knows no core count yet) counts as 1, so no
// caller divides by zero.

#include <algorithm>

namespace neuron {

// The global id of logical core `local_core` of device `device`.
constexpr int GlobalCoreId(int device, int local_core, int cores_per_device) {
  return device * std::max(1, cores_per_device) + local_core;
}

// The device a global core id lives on.
constexpr int DeviceOfCore(int core_id, int cores_per_device) {
  return core_id / std::max(1, cores_per_device);
}

// The logical core within its device (the datastore's core slot) of a global core id.
constexpr int LocalCoreOf(int core_id, int cores_per_device) {
  return core_id % std::max(1, cores_per_device);
}

}  // namespace neuron
