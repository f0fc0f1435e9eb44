#pragma once
// NeuronLink topology as a graph over device indices, built from what connected_devices says
// (so it is the same on hardware and on the simulator). Immutable; thread-safe.

#include <cstdint>
#include <vector>

namespace neuron {

class Topology {
 public:
  Topology() = default;
  // neighbours[d] lists device d's connected devices; ids outside [0, size) are ignored, and a
  // link counts in both directions even if only one side lists it.
  explicit Topology(const std::vector<std::vector<int>>& neighbours);

  int size() const { return static_cast<int>(adjacency_.size()); }
  const std::vector<int>& Neighbours(int device) const;
  bool Adjacent(int a, int b) const;
  // Hops along NeuronLink; kUnreachable when there is no path.
  int Distance(int a, int b) const;
  // True when the devices form one connected piece of the link graph (a single device does).
  bool IsConnected(const std::vector<int>& devices) const;

  static constexpr int kUnreachable = 1 << 20;

 private:
  std::vector<std::vector<int>> adjacency_;
  std::vector<int> distance_;  // size() x size(), all pairs by BFS
};

}  // namespace neuron
