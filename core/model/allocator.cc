#include "core/model/allocator.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <tuple>
#include <utility>

namespace neuron {
namespace {

// How good one candidate set is; lexicographic, smaller is better. The order of the fields is
// the order of the rules in allocator.h.
struct Score {
  int span;          // max - min of the set: k - 1 exactly when the set is contiguous
  int disconnected;  // 0 when the devices the set touches form one piece of the link graph
  int devices;       // devices touched (cores: pack into few)
  int whole_free;    // touched devices that were entirely free (cores: keep them whole)
  int runs_delta;    // free runs left behind minus before: -1 fills a run, +1 splits one
  int run_length;    // length of the free run the set is cut from (best fit: smallest)

  bool operator<(const Score& o) const {
    return std::tie(span, disconnected, devices, whole_free, runs_delta, run_length) <
           std::tie(o.span, o.disconnected, o.devices, o.whole_free, o.runs_delta, o.run_length);
  }
};

}  // namespace

Allocator::Allocator(Topology topology, int cores_per_device)
    : topology_(std::move(topology)), cores_per_device_(std::max(cores_per_device, 1)) {}

std::vector<int> Allocator::PreferDevices(std::span<const int> available,
                                          std::span<const int> must_include, int size) const {
  return Choose(available, must_include, size, 1);
}

std::vector<int> Allocator::PreferCores(std::span<const int> available,
                                        std::span<const int> must_include, int size) const {
  return Choose(available, must_include, size, cores_per_device_);
}

bool Allocator::IsContiguous(std::span<const int> ids) {
  if (ids.empty()) return false;
  const auto [lo, hi] = std::minmax_element(ids.begin(), ids.end());
  // 64-bit: ids may be anything, including INT_MIN and INT_MAX in one request.
  const int64_t span = static_cast<int64_t>(*hi) - *lo;
  if (span != static_cast<int64_t>(ids.size()) - 1) return false;
  // The span matches the count, so the ids are consecutive unless one repeats.
  std::vector<char> seen(ids.size(), 0);
  for (int id : ids) {
    char& s = seen[static_cast<size_t>(static_cast<int64_t>(id) - *lo)];
    if (s) return false;
    s = 1;
  }
  return true;
}

bool Allocator::IsConnected(std::span<const int> devices) const {
  return topology_.IsConnected(std::vector<int>(devices.begin(), devices.end()));
}

// One pass over candidate sets, one per lowest id `lo`: all of must_include plus the
// k - |must_include| lowest other pool ids at or above `lo`. For a given lowest id that is the
// most compact set there is, so the candidates include every contiguous window (when one holds
// must_include) and, failing that, the set of smallest span. Candidates are scored in O(1) by
// span first; only those that tie with the best so far pay for the device walk.
std::vector<int> Allocator::Choose(std::span<const int> available,
                                   std::span<const int> must_include, int size,
                                   int units_per_device) const {
  const int devices = topology_.size();
  const int n = devices * units_per_device;
  std::vector<char> in_pool(n, 0), is_must(n, 0);
  for (int id : available) {
    if (id >= 0 && id < n) in_pool[id] = 1;
  }
  std::vector<int> must;
  must.reserve(must_include.size());
  for (int id : must_include) {
    if (id < 0 || id >= n || is_must[id]) continue;
    is_must[id] = 1;
    in_pool[id] = 1;
    must.push_back(id);
  }
  std::sort(must.begin(), must.end());

  // Pool ids other than must_include, ascending: the candidates draw from these.
  std::vector<int> others;
  others.reserve(n);
  for (int id = 0; id < n; ++id) {
    if (in_pool[id] && !is_must[id]) others.push_back(id);
  }
  const int pool = static_cast<int>(must.size() + others.size());
  const int k = std::min(size, pool);
  const int need = k - static_cast<int>(must.size());
  if (need <= 0) return must;
  if (k == pool) {
    std::vector<int> all;
    all.reserve(pool);
    for (int id = 0; id < n; ++id) {
      if (in_pool[id]) all.push_back(id);
    }
    return all;
  }

  // Free runs of the pool, and which devices are entirely in the pool.
  std::vector<int> run_start(n, 0), run_end(n, 0);
  for (int id = 0; id < n; ++id) {
    if (in_pool[id]) run_start[id] = (id > 0 && in_pool[id - 1]) ? run_start[id - 1] : id;
  }
  for (int id = n - 1; id >= 0; --id) {
    if (in_pool[id]) run_end[id] = (id + 1 < n && in_pool[id + 1]) ? run_end[id + 1] : id;
  }
  std::vector<char> whole_free(devices, 0);
  for (int d = 0; d < devices; ++d) {
    const int first = d * units_per_device;
    whole_free[d] = std::all_of(in_pool.begin() + first, in_pool.begin() + first + units_per_device,
                                [](char c) { return c != 0; });
  }

  // Scratch for the device walk, allocated once: `mark[d] == stamp` puts device d in the current
  // candidate, `seen[d] == stamp` marks it reached from the first one.
  std::vector<int> mark(devices, -1), seen(devices, -1), touched;
  touched.reserve(devices);

  const int must_lo = must.empty() ? n : must.front();
  const int must_hi = must.empty() ? -1 : must.back();
  bool have_best = false;
  Score best{};
  size_t best_first = 0;  // index in `others` of the best candidate's first drawn id

  size_t first = 0;  // first index in `others` with others[first] >= lo
  for (int lo = 0; lo <= must_lo && lo < n; ++lo) {
    while (first < others.size() && others[first] < lo) ++first;
    if (!in_pool[lo]) continue;
    if (first + need > others.size()) break;  // too few ids left at or above lo
    const int hi = std::max(others[first + need - 1], must_hi);
    const int span = hi - lo;
    if (have_best && span > best.span) continue;

    const int stamp = lo;
    touched.clear();
    auto touch = [&](int id) {
      const int d = id / units_per_device;
      if (mark[d] != stamp) {
        mark[d] = stamp;
        touched.push_back(d);
      }
    };
    for (int id : must) touch(id);
    for (size_t i = first; i < first + need; ++i) touch(others[i]);

    // Connectivity by breadth-first search over the touched devices, `touched` doubling as the
    // queue's storage (reached devices are moved to its front).
    size_t reached = 1, head = 0;
    seen[touched[0]] = stamp;
    while (head < reached) {
      for (int v : topology_.Neighbours(touched[head++])) {
        if (mark[v] != stamp || seen[v] == stamp) continue;
        seen[v] = stamp;
        auto it = std::find(touched.begin() + reached, touched.end(), v);
        std::iter_swap(touched.begin() + reached, it);
        ++reached;
      }
    }

    Score s{};
    s.span = span;
    s.disconnected = reached == touched.size() ? 0 : 1;
    s.devices = static_cast<int>(touched.size());
    for (int d : touched) s.whole_free += whole_free[d];
    if (span == k - 1) {  // contiguous: lo..hi lie in one free run
      const int rs = run_start[lo], re = run_end[lo];
      s.runs_delta = (lo == rs ? 0 : 1) + (hi == re ? 0 : 1) - 1;
      s.run_length = re - rs + 1;
    }
    if (!have_best || s < best) {
      have_best = true;
      best = s;
      best_first = first;
    }
  }

  std::vector<int> out;
  out.reserve(k);
  std::merge(must.begin(), must.end(), others.begin() + best_first,
             others.begin() + best_first + need, std::back_inserter(out));
  return out;
}

}  // namespace neuron
