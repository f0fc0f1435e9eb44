#include "tests/support/alloc_churn.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <numeric>
#include <random>
#include <set>
#include <utility>

namespace neuron::testing {
namespace {

constexpr std::array<int, 5> kDeviceSizes = {1, 2, 4, 8, 16};
constexpr std::array<int, 6> kCoreSizes = {1, 2, 4, 8, 16, 32};

std::vector<int> DevicesOf(const std::vector<int>& units, int units_per_device) {
  std::set<int> d;
  for (int u : units) d.insert(u / units_per_device);
  return {d.begin(), d.end()};
}

// Brute force, independent of the allocator's search: is some window [lo, lo + k) of units
// entirely free, with its devices connected on the link graph?
bool ConnectedWindowFree(const std::vector<char>& free, int k, int units_per_device,
                         const Topology& topology) {
  const int n = static_cast<int>(free.size());
  for (int lo = 0; lo + k <= n; ++lo) {
    if (!std::all_of(free.begin() + lo, free.begin() + lo + k, [](char c) { return c != 0; })) {
      continue;
    }
    std::vector<int> window(k);
    std::iota(window.begin(), window.end(), lo);
    if (topology.IsConnected(DevicesOf(window, units_per_device))) return true;
  }
  return false;
}

// The row index of a request: device rows first, then core rows, "other" last.
size_t RowOf(bool cores, int size) {
  if (!cores) {
    const auto it = std::find(kDeviceSizes.begin(), kDeviceSizes.end(), size);
    return static_cast<size_t>(it - kDeviceSizes.begin());  // the trace has no other sizes
  }
  const auto it = std::find(kCoreSizes.begin(), kCoreSizes.end(), size);
  return kDeviceSizes.size() + static_cast<size_t>(it - kCoreSizes.begin());
}

std::vector<ChurnRow> EmptyRows() {
  std::vector<ChurnRow> rows;
  rows.reserve(kDeviceSizes.size() + kCoreSizes.size() + 1);
  for (int s : kDeviceSizes) rows.push_back({.cores = false, .size = std::to_string(s)});
  for (int s : kCoreSizes) rows.push_back({.cores = true, .size = std::to_string(s)});
  rows.push_back({.cores = true, .size = "other"});
  return rows;
}

// The node's occupancy under our allocator, with the plugin's double-booking mask.
class Node {
 public:
  explicit Node(const Allocator& a)
      : devices_(a.topology().size()),
        per_(a.cores_per_device()),
        device_held_(devices_, 0),
        core_used_(static_cast<size_t>(devices_ * per_), 0) {}

  // Free units for a request of that kind, as a mask over all units and as a list.
  std::vector<int> Free(bool cores, std::vector<char>* mask) const {
    const int units = cores ? devices_ * per_ : devices_;
    mask->assign(units, 0);
    std::vector<int> available;
    for (int u = 0; u < units; ++u) {
      const bool ok = cores ? !core_used_[u] && !device_held_[u / per_]
                            : !device_held_[u] && std::none_of(core_used_.begin() + Unit(u),
                                                               core_used_.begin() + Unit(u + 1),
                                                               [](char c) { return c != 0; });
      if (ok) (*mask)[u] = 1, available.push_back(u);
    }
    return available;
  }

  // Where device d's cores start in core_used_.
  std::ptrdiff_t Unit(int d) const { return static_cast<std::ptrdiff_t>(d) * per_; }

  void Set(bool cores, const std::vector<int>& units, char value) {
    for (int u : units) (cores ? core_used_ : device_held_)[u] = value;
  }

 private:
  int devices_, per_;
  std::vector<char> device_held_, core_used_;
};

}  // namespace

std::vector<ChurnRequest> ChurnTrace(int arrivals, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::discrete_distribution<int> device_size({20, 20, 25, 25, 10});
  std::discrete_distribution<int> core_size({20, 25, 20, 15, 10, 5, 5});
  std::vector<ChurnRequest> trace;
  for (int seen = 0; seen < arrivals;) {
    ChurnRequest r{};
    r.arrival = unit(rng) < 0.5;
    if (r.arrival) {
      ++seen;
      r.cores = unit(rng) < 0.5;
      if (!r.cores) {
        r.size = kDeviceSizes[static_cast<size_t>(device_size(rng))];
      } else {
        const size_t i = static_cast<size_t>(core_size(rng));
        r.size =
            i < kCoreSizes.size() ? kCoreSizes[i] : std::uniform_int_distribution<int>(1, 32)(rng);
      }
    } else {
      r.pick = unit(rng);
    }
    trace.push_back(r);
  }
  return trace;
}

ChurnComparison CompareChurn(const std::vector<ChurnRequest>& trace, const Allocator& a,
                             uint32_t random_seed) {
  std::mt19937 go_map_order(random_seed);
  Node node(a);
  struct Live {
    bool cores;
    std::vector<int> units;
  };
  std::vector<Live> live;
  ChurnComparison c;
  c.rows = EmptyRows();
  std::vector<char> mask;
  for (const ChurnRequest& q : trace) {
    if (!q.arrival) {
      if (live.empty()) continue;
      const size_t i = std::min(live.size() - 1, static_cast<size_t>(q.pick * live.size()));
      node.Set(live[i].cores, live[i].units, 0);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    const int kind = q.cores ? 1 : 0;
    ++c.arrivals[kind];
    const std::vector<int> available = node.Free(q.cores, &mask);
    if (static_cast<int>(available.size()) < q.size) {
      ++c.dropped[kind];
      continue;
    }
    std::vector<int> picks[kChurnPolicies];
    picks[kOurs] =
        q.cores ? a.PreferCores(available, {}, q.size) : a.PreferDevices(available, {}, q.size);
    picks[kLowestFree].assign(available.begin(), available.begin() + q.size);
    picks[kRandomPick] = available;
    std::shuffle(picks[kRandomPick].begin(), picks[kRandomPick].end(), go_map_order);
    picks[kRandomPick].resize(static_cast<size_t>(q.size));

    ChurnRow& row = c.rows[RowOf(q.cores, q.size)];
    ++row.placed;
    const int upd = q.cores ? a.cores_per_device() : 1;
    if (ConnectedWindowFree(mask, q.size, upd, a.topology())) {
      ++row.possible;
      for (int p = 0; p < kChurnPolicies; ++p) {
        if (Allocator::IsContiguous(picks[p]) && a.IsConnected(DevicesOf(picks[p], upd))) {
          ++row.met[p];
        }
      }
    }
    node.Set(q.cores, picks[kOurs], 1);
    live.push_back({q.cores, std::move(picks[kOurs])});
  }
  return c;
}

std::string FormatChurnTable(const ChurnComparison& c) {
  auto share = [](int met, int possible) {
    return possible == 0 ? std::string("n/a") : fmt::format("{:.1f}%", 100.0 * met / possible);
  };
  std::string out = fmt::format("{:<7} | {:>5} | {:>6} | {:>8} | {:>6} | {:>17} | {:>6}\n", "kind",
                                "size", "placed", "possible", "ours", "lowest-free-IDs", "random");
  for (const ChurnRow& r : c.rows) {
    out += fmt::format("{:<7} | {:>5} | {:>6} | {:>8} | {:>6} | {:>17} | {:>6}\n",
                       r.cores ? "cores" : "devices", r.size, r.placed, r.possible,
                       share(r.met[kOurs], r.possible), share(r.met[kLowestFree], r.possible),
                       share(r.met[kRandomPick], r.possible));
  }
  out += fmt::format(
      "arrivals: devices {} (dropped, too few free: {}), cores {} (dropped: {}); 'possible' = "
      "a contiguous, connected set was free at that arrival; every policy is judged on the same "
      "free sets\n",
      c.arrivals[0], c.dropped[0], c.arrivals[1], c.dropped[1]);
  return out;
}

}  // namespace neuron::testing
