// plugin_alloc_bench: the cost of one GetPreferredAllocation answer
// (docs/architecture.md#allocation, docs/kubelet-api.md#requirements R5: answers from memory in
// microseconds). PreferDevices and PreferCores on trn1.32xlarge (16 devices, 32 cores) and
// trn2.48xlarge at LNC 1 (16 devices, 128 cores), with half of the node in use in a scattered
// pattern (fixed seed), so the search meets short free runs and partly used devices as on a busy
// node. Sizes that exceed what is free take the "everything there is" path. Reports ns per call;
// run with --benchmark_repetitions=N and quote the medians.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <vector>

#include "core/model/allocator.h"
#include "core/model/catalog.h"

namespace neuron {
namespace {

constexpr const char* kInstances[] = {"trn1.32xlarge", "trn2.48xlarge"};

// The allocator as the plugin builds it, at LNC 1 (trn2: 8 logical cores per device).
Allocator ForInstance(const char* name) {
  const InstanceSpec* spec = *FindInstance(name);
  std::vector<std::vector<int>> neighbours(spec->devices);
  for (int d = 0; d < spec->devices; ++d) neighbours[d] = ConnectedDevices(*spec, d);
  return Allocator(Topology(neighbours), LogicalCoresPerDevice(*spec, 1));
}

// A random half of `n` units, ascending: what is still free.
std::vector<int> HalfFree(int n, unsigned seed) {
  std::vector<int> units(n);
  for (int i = 0; i < n; ++i) units[i] = i;
  std::mt19937 rng(seed);
  std::shuffle(units.begin(), units.end(), rng);
  units.resize(n / 2);
  std::sort(units.begin(), units.end());
  return units;
}

void BM_PreferDevices(benchmark::State& state) {
  const char* name = kInstances[state.range(0)];
  const Allocator a = ForInstance(name);
  const std::vector<int> available = HalfFree(a.topology().size(), 1);
  const int size = static_cast<int>(state.range(1));
  // `_` is Google Benchmark's loop variable, never read by design: clang-tidy 14 reports a
  // dead store at each such loop in this file, hence the NOLINTs.
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores)
    std::vector<int> got = a.PreferDevices(available, {}, size);
    benchmark::DoNotOptimize(got.data());
  }
  state.SetLabel(name);
}
BENCHMARK(BM_PreferDevices)->ArgsProduct({{0, 1}, {1, 2, 3, 4, 8, 16}});

void BM_PreferCores(benchmark::State& state) {
  const char* name = kInstances[state.range(0)];
  const Allocator a = ForInstance(name);
  const std::vector<int> available = HalfFree(a.topology().size() * a.cores_per_device(), 2);
  const int size = static_cast<int>(state.range(1));
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores)
    std::vector<int> got = a.PreferCores(available, {}, size);
    benchmark::DoNotOptimize(got.data());
  }
  state.SetLabel(name);
}
BENCHMARK(BM_PreferCores)->ArgsProduct({{0, 1}, {1, 2, 3, 4, 8, 16, 32}});

// The kubelet's second-container shape: two cores already chosen (must_include) on a trn2.
void BM_PreferCoresMustInclude(benchmark::State& state) {
  const Allocator a = ForInstance("trn2.48xlarge");
  std::vector<int> available = HalfFree(a.topology().size() * a.cores_per_device(), 3);
  const std::vector<int> must{available[10], available[11]};
  const int size = static_cast<int>(state.range(0));
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores)
    std::vector<int> got = a.PreferCores(available, must, size);
    benchmark::DoNotOptimize(got.data());
  }
}
BENCHMARK(BM_PreferCoresMustInclude)->Arg(4)->Arg(16);

// Allocate-time checks of the kubelet's final choice.
void BM_AllocateChecks(benchmark::State& state) {
  const Allocator a = ForInstance("trn2.48xlarge");
  const std::vector<int> devices{4, 5, 6, 7, 8, 9, 10, 11};
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores)
    bool ok = Allocator::IsContiguous(devices) && a.IsConnected(devices);
    benchmark::DoNotOptimize(ok);
  }
}
BENCHMARK(BM_AllocateChecks);

}  // namespace
}  // namespace neuron

BENCHMARK_MAIN();
