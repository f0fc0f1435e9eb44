#pragma once
// The churn comparison of the allocator (core/model/allocator.h) against two baselines, shared by
// tests/core/allocator_test.cc (which asserts on it) and bench/plugin_churn_bench.cc (which
// prints it for `make bench`). GoogleTest-free.
//
// A trace of arrivals and departures on one node. At every arrival that fits by count, the three
// policies are asked what they would pick from the SAME free set, the one our allocator's own
// history left behind; only our pick is applied. So the three percentages share one
// denominator: the arrivals at which a contiguous, connected set was free. (Three independent
// histories would each count "possible" on their own free sets: a policy that fragments the node
// makes fewer requests possible and is then judged on fewer, easier cases.) The free sets are
// the ones our allocator leaves, less fragmented than the baselines' own histories would be, so
// the baselines' figures here are if anything flattering to them.
//
// Policies:
//   ours:        Allocator::PreferDevices / PreferCores;
//   lowest free: the `size` lowest free ids (a simple deterministic policy);
//   random:      the kubelet without a preference (kubernetes pkg/kubelet/cm/devicemanager,
//                devicesToAllocate: with no NUMA hint every available device is `noAffinity`
//                and allocateRemainingFrom ranges over a Go map, whose order the runtime
//                randomises), modelled as a uniformly random subset of the free ids.
//
// Not thread-safe; plain functions over values.

#include <cstdint>
#include <string>
#include <vector>

#include "core/model/allocator.h"

namespace neuron::testing {

struct ChurnRequest {
  bool arrival = false;
  bool cores = false;  // core request (else whole devices)
  int size = 0;
  double pick = 0;  // departure: which live allocation, as a fraction of the live count
};

// `arrivals` arrivals interleaved with departures (equal odds), from `seed`. The mix, as a
// training cluster sees it (share in brackets): whole-device requests (50%) for 1 (20%), 2 (20%),
// 4 (25%), 8 (25%) or 16 (10%) devices; core requests (50%) for 1 (20%), 2 (25%), 4 (20%),
// 8 (15%), 16 (10%) or 32 (5%) cores, plus a uniform size 1..32 (5%).
std::vector<ChurnRequest> ChurnTrace(int arrivals, uint32_t seed);

enum ChurnPolicy : int { kOurs = 0, kLowestFree = 1, kRandomPick = 2, kChurnPolicies = 3 };

// One request size (or group of sizes) of one kind.
struct ChurnRow {
  bool cores = false;
  std::string size;  // "4", or "other" for core sizes that are not a power of two up to 32
  int placed = 0;    // arrivals of this size that fitted by count
  int possible = 0;  // of those, the ones at which a contiguous, connected set was free
  // Of `possible`, how often each policy's pick was contiguous and connected.
  int met[kChurnPolicies] = {};
};

struct ChurnComparison {
  std::vector<ChurnRow> rows;  // devices 1, 2, 4, 8, 16; cores 1, 2, 4, 8, 16, 32, other
  int arrivals[2] = {};        // by kind: 0 devices, 1 cores
  int dropped[2] = {};         // arrivals that did not fit by count
};

// Plays `trace` on the node of `allocator` (departures free a live allocation of ours chosen by
// `pick`). Double booking is modelled as the plugin masks it (docs/architecture.md#health): a
// device request sees only devices with no core in use; a core request sees only cores of
// devices not held whole. `random_seed` drives the random baseline.
ChurnComparison CompareChurn(const std::vector<ChurnRequest>& trace, const Allocator& allocator,
                             uint32_t random_seed);

// The table: kind | size | placed | possible | ours % | lowest-free-IDs % | random %, one line
// per row, "n/a" where nothing was possible (unknown is not 100 % or 0 %).
std::string FormatChurnTable(const ChurnComparison& c);

}  // namespace neuron::testing
