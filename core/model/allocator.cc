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

// The ids a request draws from, over `n` ids: must_include (valid ids once each, ascending) and
// the other pool ids (ascending), the ones candidates are completed from.
struct Pool {
  std::vector<char> in_pool;  // by id: available or must_include
  std::vector<int> must;
  std::vector<int> others;
};

Pool MakePool(std::span<const int> available, std::span<const int> must_include, int n) {
  Pool p;
  p.in_pool.assign(n, 0);
  std::vector<char> is_must(n, 0);
  for (int id : available) {
    if (id >= 0 && id < n) p.in_pool[id] = 1;
  }
  p.must.reserve(must_include.size());
  for (int id : must_include) {
    if (id < 0 || id >= n || is_must[id]) continue;
    is_must[id] = 1;
    p.in_pool[id] = 1;
    p.must.push_back(id);
  }
  std::sort(p.must.begin(), p.must.end());
  p.others.reserve(n);
  for (int id = 0; id < n; ++id) {
    if (p.in_pool[id] && !is_must[id]) p.others.push_back(id);
  }
  return p;
}

// Scores candidate sets of one pool. The pool's free runs and wholly free devices are computed
// once; the scratch for the device walk is allocated once: `mark_[d] == stamp` puts device d in
// the current candidate, `seen_[d] == stamp` marks it reached from the first one.
class CandidateScorer {
 public:
  CandidateScorer(const Topology& topology, const std::vector<char>& in_pool, int units_per_device)
      : topology_(topology),
        units_per_device_(units_per_device),
        run_start_(in_pool.size(), 0),
        run_end_(in_pool.size(), 0),
        whole_free_(topology.size(), 0),
        mark_(topology.size(), -1),
        seen_(topology.size(), -1) {
    const int n = static_cast<int>(in_pool.size());
    for (int id = 0; id < n; ++id) {
      if (in_pool[id]) run_start_[id] = (id > 0 && in_pool[id - 1]) ? run_start_[id - 1] : id;
    }
    for (int id = n - 1; id >= 0; --id) {
      if (in_pool[id]) run_end_[id] = (id + 1 < n && in_pool[id + 1]) ? run_end_[id + 1] : id;
    }
    for (int d = 0; d < topology.size(); ++d) {
      const auto first = in_pool.begin() + d * units_per_device;
      whole_free_[d] = std::all_of(first, first + units_per_device, [](char c) { return c != 0; });
    }
    touched_.reserve(topology.size());
  }

  // The candidate `must` ∪ `drawn` of lowest id `lo` and highest `hi`, of `k` ids in all.
  Score Rate(std::span<const int> must, std::span<const int> drawn, int lo, int hi, int k) {
    const int stamp = lo;  // candidates have distinct lowest ids, so no scratch reset is needed
    touched_.clear();
    for (int id : must) Touch(id / units_per_device_, stamp);
    for (int id : drawn) Touch(id / units_per_device_, stamp);
    Score s{};
    s.span = hi - lo;
    s.disconnected = ReachAll(stamp) ? 0 : 1;
    s.devices = static_cast<int>(touched_.size());
    for (int d : touched_) s.whole_free += whole_free_[d];
    if (s.span == k - 1) {  // contiguous: lo..hi lie in one free run
      const int rs = run_start_[lo], re = run_end_[lo];
      s.runs_delta = (lo == rs ? 0 : 1) + (hi == re ? 0 : 1) - 1;
      s.run_length = re - rs + 1;
    }
    return s;
  }

 private:
  void Touch(int d, int stamp) {
    if (mark_[d] == stamp) return;
    mark_[d] = stamp;
    touched_.push_back(d);
  }

  // Connectivity by breadth-first search over the touched devices, `touched_` doubling as the
  // queue's storage (reached devices are moved to its front).
  bool ReachAll(int stamp) {
    size_t reached = 1, head = 0;
    seen_[touched_[0]] = stamp;
    while (head < reached) {
      for (int v : topology_.Neighbours(touched_[head++])) {
        if (mark_[v] != stamp || seen_[v] == stamp) continue;
        seen_[v] = stamp;
        auto it = std::find(touched_.begin() + reached, touched_.end(), v);
        std::iter_swap(touched_.begin() + reached, it);
        ++reached;
      }
    }
    return reached == touched_.size();
  }

  const Topology& topology_;
  int units_per_device_;
  std::vector<int> run_start_, run_end_;  // by pool id: the free run it lies in
  std::vector<char> whole_free_;          // by device: every unit in the pool
  std::vector<int> mark_, seen_, touched_;
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
  const int n = topology_.size() * units_per_device;
  const Pool pool = MakePool(available, must_include, n);
  const std::vector<int>& must = pool.must;
  const std::vector<int>& others = pool.others;
  const int pool_size = static_cast<int>(must.size() + others.size());
  const int k = std::min(size, pool_size);
  const int need = k - static_cast<int>(must.size());
  if (need <= 0) return must;
  if (k == pool_size) {
    std::vector<int> all;
    all.reserve(pool_size);
    std::merge(must.begin(), must.end(), others.begin(), others.end(), std::back_inserter(all));
    return all;
  }

  CandidateScorer scorer(topology_, pool.in_pool, units_per_device);
  const int must_lo = must.empty() ? n : must.front();
  const int must_hi = must.empty() ? -1 : must.back();
  bool have_best = false;
  Score best{};
  size_t best_first = 0;  // index in `others` of the best candidate's first drawn id
  size_t first = 0;       // first index in `others` with others[first] >= lo
  for (int lo = 0; lo <= must_lo && lo < n; ++lo) {
    while (first < others.size() && others[first] < lo) ++first;
    if (!pool.in_pool[lo]) continue;
    if (first + need > others.size()) break;  // too few ids left at or above lo
    const int hi = std::max(others[first + need - 1], must_hi);
    if (have_best && hi - lo > best.span) continue;  // scored in O(1) by span first
    const Score s = scorer.Rate(must, std::span<const int>(others).subspan(first, need), lo, hi, k);
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
