#include "core/model/topology.h"

#include <algorithm>
#include <deque>

namespace neuron {

Topology::Topology(const std::vector<std::vector<int>>& neighbours)
    : adjacency_(neighbours.size()) {
  const int n = size();
  for (int a = 0; a < n; ++a) {
    for (int b : neighbours[a]) {
      if (b < 0 || b >= n || b == a) continue;
      adjacency_[a].push_back(b);
      adjacency_[b].push_back(a);
    }
  }
  for (auto& list : adjacency_) {
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
  }
}

const std::vector<int>& Topology::Neighbours(int device) const {
  static const std::vector<int> kNone;
  return device >= 0 && device < size() ? adjacency_[device] : kNone;
}

bool Topology::Adjacent(int a, int b) const {
  const std::vector<int>& list = Neighbours(a);
  return std::binary_search(list.begin(), list.end(), b);
}

bool Topology::IsConnected(const std::vector<int>& devices) const {
  if (devices.empty()) return false;
  std::vector<char> in_set(size(), 0), seen(size(), 0);
  for (int d : devices) {
    if (d < 0 || d >= size()) return false;
    in_set[d] = 1;
  }
  std::deque<int> queue{devices.front()};
  seen[devices.front()] = 1;
  size_t reached = 1;
  while (!queue.empty()) {
    const int u = queue.front();
    queue.pop_front();
    for (int v : adjacency_[u]) {
      if (!in_set[v] || seen[v]) continue;
      seen[v] = 1;
      ++reached;
      queue.push_back(v);
    }
  }
  size_t distinct = 0;
  for (char c : in_set) distinct += c;
  return reached == distinct;
}

}  // namespace neuron
