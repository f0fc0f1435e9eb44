#include "core/model/allocator.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <numeric>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/model/catalog.h"
#include "tests/support/alloc_churn.h"

namespace neuron {
namespace {

using ::testing::ElementsAre;
using ::testing::IsSupersetOf;
namespace churn = ::neuron::testing;

// The allocator as the plugin builds it: the link graph from connected_devices (catalog), the
// logical cores per device at the instance's LNC.
Allocator ForInstance(std::string_view name, int lnc = 0) {
  absl::StatusOr<const InstanceSpec*> spec = FindInstance(name);
  EXPECT_TRUE(spec.ok()) << spec.status();
  std::vector<std::vector<int>> neighbours((*spec)->devices);
  for (int d = 0; d < (*spec)->devices; ++d) neighbours[d] = ConnectedDevices(**spec, d);
  absl::StatusOr<int> resolved = ResolveLnc(**spec, lnc);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return Allocator(Topology(neighbours), LogicalCoresPerDevice(**spec, *resolved));
}

std::vector<int> Iota(int n, int from = 0) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), from);
  return v;
}

std::vector<int> DevicesOf(const std::vector<int>& units, int units_per_device) {
  std::set<int> d;
  for (int u : units) d.insert(u / units_per_device);
  return {d.begin(), d.end()};
}

int CeilDiv(int a, int b) { return (a + b - 1) / b; }

// Brute force, independent of the allocator's search: a window [lo, lo+k) of units in `pool`
// (units_per_device units per device) that holds `must` and whose devices are connected?
// `connected` false asks for any such window.
bool WindowExists(const std::vector<char>& pool, const std::vector<int>& must, int k,
                  int units_per_device, const Topology& topology, bool connected) {
  const int n = static_cast<int>(pool.size());
  for (int lo = 0; lo + k <= n; ++lo) {
    const std::vector<int> w = Iota(k, lo);
    if (!std::all_of(w.begin(), w.end(), [&](int u) { return pool[u] != 0; })) continue;
    if (!std::all_of(must.begin(), must.end(), [&](int m) { return m >= lo && m < lo + k; })) {
      continue;
    }
    if (!connected || topology.IsConnected(DevicesOf(w, units_per_device))) return true;
  }
  return false;
}

// Smallest max-min over sets of k pool units holding `must`, by windows and prefix counts.
int MinSpan(const std::vector<char>& pool, const std::vector<int>& must, int k) {
  const int n = static_cast<int>(pool.size());
  std::vector<int> prefix(n + 1, 0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + pool[i];
  int best = INT_MAX;
  for (int a = 0; a < n; ++a) {
    for (int b = a; b < n; ++b) {
      if (prefix[b + 1] - prefix[a] < k) continue;
      if (!std::all_of(must.begin(), must.end(), [&](int m) { return m >= a && m <= b; })) continue;
      best = std::min(best, b - a);
    }
  }
  return best;
}

// --- 1. Empty nodes: every request size gets a contiguous, connected, compact answer.

struct EmptyNodeCase {
  const char* instance;
  int lnc;
  int devices;
  int cores;
};

// Names the case in test listings (gtest would print the bytes).
void PrintTo(const EmptyNodeCase& c, std::ostream* os) { *os << c.instance << " LNC " << c.lnc; }

class EmptyNodeTest : public ::testing::TestWithParam<EmptyNodeCase> {};

TEST_P(EmptyNodeTest, EveryDeviceSizeIsContiguousAndConnected) {
  const EmptyNodeCase& c = GetParam();
  const Allocator a = ForInstance(c.instance, c.lnc);
  ASSERT_EQ(a.topology().size(), c.devices);
  const std::vector<int> all = Iota(c.devices);
  const std::vector<char> pool(c.devices, 1);
  // The sizes a training job asks for, and every other size too.
  for (int size = 1; size <= c.devices; ++size) {
    SCOPED_TRACE(fmt::format("{} devices", size));
    const std::vector<int> got = a.PreferDevices(all, {}, size);
    ASSERT_EQ(static_cast<int>(got.size()), size);
    EXPECT_TRUE(Allocator::IsContiguous(got));
    // On an empty torus or ring a connected window exists for every size (rows, then rows plus
    // the start of the next row, which links to the row above); the answer must be one.
    ASSERT_TRUE(WindowExists(pool, {}, size, 1, a.topology(), true));
    EXPECT_TRUE(a.IsConnected(got));
  }
  // Beyond the node: everything there is.
  EXPECT_EQ(a.PreferDevices(all, {}, c.devices + 4), all);
}

TEST_P(EmptyNodeTest, EveryCoreSizeIsContiguousOnTheFewestDevices) {
  const EmptyNodeCase& c = GetParam();
  const Allocator a = ForInstance(c.instance, c.lnc);
  ASSERT_EQ(a.topology().size() * a.cores_per_device(), c.cores);
  const std::vector<int> all = Iota(c.cores);
  for (int size = 1; size <= c.cores; ++size) {
    SCOPED_TRACE(fmt::format("{} cores", size));
    const std::vector<int> got = a.PreferCores(all, {}, size);
    ASSERT_EQ(static_cast<int>(got.size()), size);
    EXPECT_TRUE(Allocator::IsContiguous(got));
    const std::vector<int> devices = DevicesOf(got, a.cores_per_device());
    EXPECT_EQ(static_cast<int>(devices.size()), CeilDiv(size, a.cores_per_device()));
    EXPECT_TRUE(a.IsConnected(devices));
  }
}

INSTANTIATE_TEST_SUITE_P(Catalog, EmptyNodeTest,
                         ::testing::Values(EmptyNodeCase{"trn1.32xlarge", 0, 16, 32},
                                           EmptyNodeCase{"trn2.48xlarge", 2, 16, 64},
                                           EmptyNodeCase{"trn2.48xlarge", 1, 16, 128},
                                           EmptyNodeCase{"inf2.48xlarge", 0, 12, 24}),
                         [](const auto& info) {
                           std::string name =
                               fmt::format("{}_lnc{}", info.param.instance, info.param.lnc);
                           std::replace(name.begin(), name.end(), '.', '_');
                           return name;
                         });

// The choice matters: on the trn1 torus only the rows are connected among the 13 windows of 4,
// and windows of 2 that straddle a row end (3-4, 7-8, 11-12) are not connected.
TEST(AllocatorTest, Trn1TorusConnectsOnlySomeWindows) {
  const Allocator a = ForInstance("trn1.32xlarge");
  auto connected_windows = [&](int k) {
    std::vector<int> starts;
    for (int lo = 0; lo + k <= 16; ++lo) {
      if (a.IsConnected(Iota(k, lo))) starts.push_back(lo);
    }
    return starts;
  };
  EXPECT_THAT(connected_windows(4), ElementsAre(0, 4, 8, 12));
  EXPECT_EQ(connected_windows(2).size(), 12u);
  EXPECT_EQ(connected_windows(8).size(), 9u);  // every window of two rows' length
  // With device 0 taken, a request for 4 lands on a row, not on 1-4.
  EXPECT_THAT(a.PreferDevices(Iota(15, 1), {}, 4), ElementsAre(12, 13, 14, 15));
}

TEST(AllocatorTest, DevicesPreferConnectedThenBestFit) {
  const Allocator a = ForInstance("trn1.32xlarge");
  // A free pair fills the hole it sits in rather than cutting into the free rows.
  EXPECT_THAT(a.PreferDevices(std::vector<int>{0, 1, 4, 5, 6, 7, 8, 9, 10, 11}, {}, 2),
              ElementsAre(0, 1));
  // 3-4 fills a hole exactly but is not linked; 8-9 is.
  EXPECT_THAT(a.PreferDevices(std::vector<int>{3, 4, 8, 9, 10, 11, 12, 13}, {}, 2),
              ElementsAre(8, 9));
  // Single devices go to the smallest hole, keeping rows whole.
  EXPECT_THAT(a.PreferDevices(std::vector<int>{2, 4, 5, 6, 7}, {}, 1), ElementsAre(2));
}

TEST(AllocatorTest, CoresPackIntoPartlyUsedDevicesThenBestFit) {
  const Allocator a = ForInstance("trn1.32xlarge");  // 2 cores per device
  // Core 4 is in use (device 2 partly used): a one-core request takes its sibling, core 5.
  std::vector<int> avail = Iota(32);
  avail.erase(avail.begin() + 4);
  EXPECT_THAT(a.PreferCores(avail, {}, 1), ElementsAre(5));
  // Two cores: one whole device (2-3) rather than straddling devices 0 and 1 (1-2), and the
  // small run 1-3 rather than the long one.
  std::vector<int> two{1, 2, 3};
  for (int c = 10; c < 32; ++c) two.push_back(c);
  EXPECT_THAT(a.PreferCores(two, {}, 2), ElementsAre(2, 3));
  // trn2 at LNC 2 (4 cores per device): 6 cores fill device 1's free half (6, 7) and device 2.
  const Allocator t2 = ForInstance("trn2.48xlarge", 2);
  std::vector<int> avail2;
  for (int c = 6; c < 64; ++c) avail2.push_back(c);
  EXPECT_THAT(t2.PreferCores(avail2, {}, 6), ElementsAre(6, 7, 8, 9, 10, 11));
}

TEST(AllocatorTest, MustIncludeIsKeptAndSteersTheRange) {
  const Allocator a = ForInstance("trn1.32xlarge");
  const std::vector<int> all = Iota(16);
  // An init container's devices 9 and 10 are reused: the range grows around them, on a row.
  EXPECT_THAT(a.PreferDevices(all, std::vector<int>{9, 10}, 4), ElementsAre(8, 9, 10, 11));
  // must_include need not be in available (the kubelet adds it, but we do not rely on that).
  EXPECT_THAT(a.PreferDevices(std::vector<int>{0, 1, 2}, std::vector<int>{3}, 4),
              ElementsAre(0, 1, 2, 3));
  // No contiguous set holds 0 and 8: the answer still holds both and is as compact as can be.
  const std::vector<int> far = a.PreferDevices(all, std::vector<int>{0, 8}, 3);
  ASSERT_EQ(far.size(), 3u);
  EXPECT_THAT(far, IsSupersetOf({0, 8}));
  // must_include larger than size: must_include wins.
  EXPECT_THAT(a.PreferDevices(all, std::vector<int>{5, 1, 3}, 2), ElementsAre(1, 3, 5));
}

TEST(AllocatorTest, GarbageGetsAnAnswerNotACrash) {
  const Allocator a = ForInstance("trn1.32xlarge");
  const std::vector<int> junk{-5, 3, 3, 99, 4, INT_MIN, INT_MAX, 5, 16};
  EXPECT_THAT(a.PreferDevices(junk, {}, 2), ElementsAre(4, 5));  // 4-5 linked, 3-4 not
  EXPECT_TRUE(a.PreferDevices(junk, {}, 0).empty());
  EXPECT_TRUE(a.PreferDevices(junk, {}, -3).empty());
  EXPECT_THAT(a.PreferDevices(junk, {}, 100), ElementsAre(3, 4, 5));
  EXPECT_THAT(a.PreferDevices({}, std::vector<int>{-1, 7, 7, 40}, 1), ElementsAre(7));
  EXPECT_TRUE(a.PreferCores({}, {}, 4).empty());
  const Allocator none(Topology(), 0);
  EXPECT_TRUE(none.PreferDevices(junk, junk, 4).empty());
  EXPECT_TRUE(none.PreferCores(junk, junk, 4).empty());
}

// --- 2. The contract on random inputs, garbage included.

// One random request: a node with a random share in use, then garbage (ids beyond the node,
// negatives, repeats), sometimes units that must be included, and a size that may be nonsense.
struct RandomRequest {
  int n = 0;    // units on the node (devices, or cores)
  int upd = 1;  // units per device
  std::vector<int> available, must;
  int size = 0;
};

RandomRequest MakeRandomRequest(const Allocator& a, bool cores, std::mt19937& rng) {
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  RandomRequest r;
  r.upd = cores ? a.cores_per_device() : 1;
  r.n = a.topology().size() * r.upd;
  const int n = r.n;
  const int fill = uniform(0, 100);
  for (int u = 0; u < n; ++u) {
    if (uniform(0, 99) < fill) r.available.push_back(u);
  }
  std::shuffle(r.available.begin(), r.available.end(), rng);
  for (int i = uniform(0, 3); i > 0; --i) {
    switch (uniform(0, 3)) {
      case 0:
        r.available.push_back(-uniform(1, 1000));
        break;
      case 1:
        r.available.push_back(n + uniform(0, 1000));
        break;
      case 2:
        if (!r.available.empty()) r.available.push_back(r.available[0]);
        break;
      default:
        r.available.push_back(uniform(INT_MIN / 2, INT_MAX / 2));
        break;
    }
  }
  for (int i = uniform(0, 2) == 0 ? uniform(1, 4) : 0; i > 0; --i) {
    // Mostly taken from available (the kubelet's case), sometimes not, sometimes garbage.
    const int kind = uniform(0, 9);
    if (kind < 7 && !r.available.empty()) {
      r.must.push_back(r.available[uniform(0, static_cast<int>(r.available.size()) - 1)]);
    } else if (kind < 9) {
      r.must.push_back(uniform(0, n - 1));
    } else {
      r.must.push_back(uniform(-3, n + 3));
    }
  }
  r.size = uniform(-2, n + 4);
  return r;
}

// What a request offers once garbage is dropped: the pool (available or must-include, on the
// node) and the must-include set.
struct Offer {
  std::vector<char> pool;
  std::set<int> must;
  int pool_size = 0;
};

Offer OfferOf(const RandomRequest& r) {
  Offer o;
  o.pool.assign(r.n, 0);
  for (int u : r.available) {
    if (u >= 0 && u < r.n) o.pool[u] = 1;
  }
  for (int u : r.must) {
    if (u < 0 || u >= r.n) continue;
    o.pool[u] = 1;
    o.must.insert(u);
  }
  o.pool_size = static_cast<int>(std::count(o.pool.begin(), o.pool.end(), 1));
  return o;
}

TEST(AllocatorTest, ContractHoldsOnRandomInputs) {
  const std::vector<Allocator> nodes{ForInstance("trn1.32xlarge"), ForInstance("trn2.48xlarge"),
                                     ForInstance("trn2.48xlarge", 1), ForInstance("inf2.48xlarge"),
                                     ForInstance("inf2.24xlarge")};
  std::mt19937 rng(20261121);
  int contiguous_checked = 0, connected_checked = 0, compact_checked = 0;
  for (int round = 0; round < 20000; ++round) {
    const Allocator& a = nodes[round % nodes.size()];
    const bool cores = round % 2 == 1;
    const RandomRequest r = MakeRandomRequest(a, cores, rng);
    const std::vector<int> got = cores ? a.PreferCores(r.available, r.must, r.size)
                                       : a.PreferDevices(r.available, r.must, r.size);

    const Offer o = OfferOf(r);
    const int must_size = static_cast<int>(o.must.size());
    const int want = std::max(must_size, std::min(std::max(r.size, 0), o.pool_size));
    SCOPED_TRACE(fmt::format("round {} n {} size {} pool {} must {} got {}", round, r.n, r.size,
                             o.pool_size, fmt::join(o.must, ","), fmt::join(got, ",")));
    ASSERT_EQ(static_cast<int>(got.size()), want);
    ASSERT_TRUE(std::is_sorted(got.begin(), got.end()));
    ASSERT_EQ(std::adjacent_find(got.begin(), got.end()), got.end()) << "duplicates";
    for (int u : got) ASSERT_TRUE(u >= 0 && u < r.n && o.pool[u]) << u << " is not on offer";
    ASSERT_THAT(got, IsSupersetOf(std::vector<int>(o.must.begin(), o.must.end())));
    if (want == 0 || want == must_size || want == o.pool_size) continue;

    // The rules, checked against brute force: contiguous when possible (hard), connected when a
    // connected contiguous set exists (soft, but always met then), else the most compact set.
    const std::vector<int> m(o.must.begin(), o.must.end());
    if (WindowExists(o.pool, m, want, r.upd, a.topology(), false)) {
      ++contiguous_checked;
      ASSERT_TRUE(Allocator::IsContiguous(got));
      if (WindowExists(o.pool, m, want, r.upd, a.topology(), true)) {
        ++connected_checked;
        ASSERT_TRUE(a.IsConnected(DevicesOf(got, r.upd)));
      }
    } else {
      ++compact_checked;
      ASSERT_EQ(got.back() - got.front(), MinSpan(o.pool, m, want));
    }
  }
  // The random inputs exercised the interesting branches, not only the trivial ones.
  EXPECT_GT(contiguous_checked, 2000);
  EXPECT_GT(connected_checked, 2000);
  EXPECT_GT(compact_checked, 2000);
  std::printf("random contract: %d contiguous, %d connected, %d best-effort cases checked\n",
              contiguous_checked, connected_checked, compact_checked);
}

// --- 3. The churn trace: a busy trn1.32xlarge over 10,000 arrivals, per request size, against
// two baselines (the kubelet's random pick and the lowest free IDs) judged on the same free sets
// (tests/support/alloc_churn.h says why one denominator, and what each baseline models).
// `make bench` prints the table (bench/plugin_churn_bench.cc).

TEST(AllocatorChurnTest, Trn1BeatsBothBaselinesAtEveryRequestSize) {
  const Allocator a = ForInstance("trn1.32xlarge");
  const churn::ChurnComparison c =
      churn::CompareChurn(churn::ChurnTrace(10000, 4242), a, /*random_seed=*/7);
  std::printf("churn trn1.32xlarge, 10,000 arrivals (seed 4242):\n%s",
              churn::FormatChurnTable(c).c_str());

  int possible[2] = {}, beaten_random = 0, beaten_lowest = 0;
  for (const churn::ChurnRow& r : c.rows) {
    SCOPED_TRACE(fmt::format("{} size {}", r.cores ? "cores" : "devices", r.size));
    // The headline: every time a contiguous, connected set was free, the allocator chose one.
    EXPECT_EQ(r.met[churn::kOurs], r.possible);
    EXPECT_GE(r.met[churn::kOurs], r.met[churn::kLowestFree]);
    EXPECT_GE(r.met[churn::kOurs], r.met[churn::kRandomPick]);
    // Every size the mix asks for was met in a state where the answer mattered.
    EXPECT_GT(r.possible, 0);
    possible[r.cores ? 1 : 0] += r.possible;
    beaten_random += r.met[churn::kOurs] - r.met[churn::kRandomPick];
    beaten_lowest += r.met[churn::kOurs] - r.met[churn::kLowestFree];
  }
  // The trace is a real test: it reached busy states for both kinds ...
  EXPECT_GT(possible[0], 1000);
  EXPECT_GT(possible[1], 1000);
  EXPECT_GT(c.dropped[0] + c.dropped[1], 100);
  // ... in which neither baseline did as well (they differ from ours somewhere, or the
  // comparison would say nothing).
  EXPECT_GT(beaten_random, 0);
  EXPECT_GT(beaten_lowest, 0);
}

// --- 4. Allocate-time checks.

TEST(AllocatorTest, IsContiguousEdgeCases) {
  using V = std::vector<int>;
  EXPECT_FALSE(Allocator::IsContiguous(V{}));
  EXPECT_TRUE(Allocator::IsContiguous(V{7}));
  EXPECT_TRUE(Allocator::IsContiguous(V{5, 3, 4}));  // any order
  EXPECT_TRUE(Allocator::IsContiguous(V{-3, -1, -2}));
  EXPECT_FALSE(Allocator::IsContiguous(V{0, 2}));
  EXPECT_FALSE(Allocator::IsContiguous(V{1, 1}));
  EXPECT_FALSE(Allocator::IsContiguous(V{1, 1, 3}));  // span matches the count, but 2 is missing
  EXPECT_FALSE(Allocator::IsContiguous(V{INT_MIN, INT_MAX}));
  EXPECT_TRUE(Allocator::IsContiguous(V{INT_MAX, INT_MAX - 1}));
  EXPECT_TRUE(Allocator::IsContiguous(V{INT_MIN + 1, INT_MIN}));
}

TEST(AllocatorTest, IsConnectedEdgeCases) {
  using V = std::vector<int>;
  const Allocator trn1 = ForInstance("trn1.32xlarge");
  EXPECT_FALSE(trn1.IsConnected(V{}));
  EXPECT_TRUE(trn1.IsConnected(V{0}));
  EXPECT_TRUE(trn1.IsConnected(V{0, 1}));
  EXPECT_FALSE(trn1.IsConnected(V{3, 4}));  // a row's end and the next row's start
  EXPECT_TRUE(trn1.IsConnected(V{3, 0}));   // the row wraps round
  EXPECT_TRUE(trn1.IsConnected(V{0, 12}));  // and so does the column
  EXPECT_FALSE(trn1.IsConnected(V{0, 5}));  // diagonal
  EXPECT_TRUE(trn1.IsConnected(V{0, 5, 1}));
  EXPECT_TRUE(trn1.IsConnected(V{1, 0, 0}));  // repeats are harmless
  EXPECT_FALSE(trn1.IsConnected(V{0, 16}));
  EXPECT_FALSE(trn1.IsConnected(V{-1}));
  const Allocator inf2 = ForInstance("inf2.48xlarge");
  EXPECT_TRUE(inf2.IsConnected(V{11, 0}));
  EXPECT_FALSE(inf2.IsConnected(V{0, 2}));
  const Allocator trn2 = ForInstance("trn2.48xlarge");
  EXPECT_TRUE(trn2.IsConnected(V{0, 12}));
  EXPECT_FALSE(trn2.IsConnected(V{3, 4}));
}

}  // namespace
}  // namespace neuron
