#pragma once
// Topology-aware choice of devices and cores (docs/architecture.md#allocation), for the device
// plugin's GetPreferredAllocation and Allocate. Kept in core, free of gRPC and of the kubelet's
// types, so that a DRA driver could reuse it (docs/kubelet-api.md#dra).
//
//   Devices: a contiguous index range (hard: the runtime needs one contiguous core range), and
//            among those, one connected on the NeuronLink graph (soft), then best fit: the range
//            that leaves the fewest and largest free runs behind (least fragmentation).
//   Cores:   a contiguous range of global logical core ids whose devices are connected (soft, as
//            for devices), packed into as few devices as possible, preferring devices that are
//            already partly used (whole free devices stay free for `aws.amazon.com/neuron`),
//            then best fit.
//
// Preferences never fail: when no set meets the rules, the answer is a best effort (the most
// compact set there is: the smallest span of ids, then the same preferences). Every answer holds
// all of `must_include`, only ids from available ∪ must_include, and exactly `size` ids when that
// many exist. Garbage is tolerated: ids outside the node are ignored, duplicates count once, a
// `size` below |must_include| (zero or negative included) yields must_include alone, a `size`
// beyond what exists yields everything there is. Remaining ties go to the lowest ids.
// Immutable after construction; thread-safe. Answers come from memory in microseconds.

#include <span>
#include <vector>

#include "core/model/topology.h"

namespace neuron {

class Allocator {
 public:
  // `topology` over device indices; `cores_per_device` logical cores per device (the
  // NEURON_RT_VISIBLE_CORES numbering: core c lives on device c / cores_per_device). Values
  // below 1 are taken as 1.
  Allocator(Topology topology, int cores_per_device);

  // Device indices, ascending.
  std::vector<int> PreferDevices(std::span<const int> available, std::span<const int> must_include,
                                 int size) const;
  // Global logical core ids, ascending.
  std::vector<int> PreferCores(std::span<const int> available, std::span<const int> must_include,
                               int size) const;

  // Allocate-time checks of the kubelet's final choice (ids in any order, no duplicates).
  // IsContiguous: one run of consecutive integers; false for an empty set or a duplicate.
  static bool IsContiguous(std::span<const int> ids);
  // Topology::IsConnected: false for an empty set or an id outside the node.
  bool IsConnected(std::span<const int> devices) const;

  const Topology& topology() const { return topology_; }
  int cores_per_device() const { return cores_per_device_; }

 private:
  // Both preferences are one search over "units" (devices: 1 unit per device; cores:
  // cores_per_device units per device).
  std::vector<int> Choose(std::span<const int> available, std::span<const int> must_include,
                          int size, int units_per_device) const;

  Topology topology_;
  int cores_per_device_;
};

}  // namespace neuron
