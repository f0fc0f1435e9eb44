#pragma once
// NeuronLink topology as a graph over device indices, built from what connected_devices says
// (so it is the same on hardware and on the simulator). Immutable; thread-safe.

#include <vector>

namespace neuron {

class Topology {
 public:
  Topology() = default;
  // neighbours[d] lists device d's connected devices; ids outside [0, size) are ignored, and a
  // link counts in both directions even if only one side lists it.
  explicit Topology(const std::vector<std::vector<int>>& neighbours);

  int size() const { return static_cast<int>(adjacency_.size()); }
  // The device's neighbours, ascending; empty for an id outside the node.
  const std::vector<int>& Neighbours(int device) const;
  bool Adjacent(int a, int b) const;
  // True when the devices form one connected piece of the link graph (a single device does).
  bool IsConnected(const std::vector<int>& devices) const;

 private:
  std::vector<std::vector<int>> adjacency_;  // sorted, without repeats
};

}  // namespace neuron
