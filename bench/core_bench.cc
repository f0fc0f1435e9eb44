// Sampler cost on a simulated trn2.48xlarge (16 devices x 8 physical cores, ~13,300 counter
// files, 16 EFA) with a few live datastore processes: the hot sample, the full sweep (one and
// two threads), and for comparison a plain open/read/close of every file the full sweep reads.
// The datastores are in this process's memory (tests/support/fake_datastores.h), so their share
// is the parsing cost alone; reaching them through the driver's device ABI is not measured here.
// Run with --benchmark_repetitions=N and quote the median aggregates.

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bench/plain_read.h"
#include "core/model/catalog.h"
#include "core/sample/sampler.h"
#include "driver-sim/driver/datastore_writer.h"
#include "driver-sim/driver/sim_tree.h"
#include "tests/support/fake_datastores.h"
#include "tests/support/sim_tree_fixture.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

namespace fs = std::filesystem;

// One tree for the whole run: creating it takes seconds.
class Node {
 public:
  static Node& Get() {
    if (instance_ == nullptr) instance_ = new Node();
    return *instance_;
  }
  static void CleanupIfCreated() {
    if (instance_ != nullptr) instance_->Cleanup();
  }
  ~Node() = default;

  const RootPaths& paths() const { return paths_; }
  const Inventory& inventory() const { return inventory_; }
  const std::vector<std::string>& files() const { return files_; }
  std::unique_ptr<DatastoreReader> datastores() const { return datastores_->Reader(); }

  void Cleanup() { dir_.reset(); }

 private:
  Node() : dir_(std::make_unique<testing::TempDir>("core_bench")), paths_(dir_->path()) {
    absl::StatusOr<std::unique_ptr<sim::SimTree>> tree =
        testing::BuildSimTree(paths_.root(), "trn2.48xlarge", {.lnc = 2});
    if (!tree.ok()) {
      std::fprintf(stderr, "simulated tree: %s\n", tree.status().ToString().c_str());
      std::abort();
    }
    tree_ = *std::move(tree);
    const InstanceSpec* spec = tree_->config().spec;
    inventory_.instance_type = std::string(spec->name);
    inventory_.lnc = 2;
    for (int d = 0; d < spec->devices; ++d) {
      NeuronDevice dev;
      dev.index = d;
      dev.physical_cores = spec->chip->physical_cores;
      inventory_.devices.push_back(dev);
    }
    for (const EfaPlacement& e : spec->efas) {
      EfaInterface efa;
      efa.name = e.name;
      inventory_.efas.push_back(efa);
    }
    // Four runtime processes, one per device on devices 0-3, every logical core busy.
    for (int d = 0; d < 4; ++d) {
      sim::DatastoreWriter& w = datastores_->Add(d, 10000 + d);
      w.SetRuntimeVersion(2, 24, 7);
      for (int k = 0; k < 4; ++k) (void)w.SetCoreCounter(k, nds::kTimeInUse, uint64_t{1000} * k);
    }
    CollectFiles();
  }

  // The files a full sweep reads: every file under neuronN/ and the EFA counter directories,
  // less the inventory attributes the Sampler leaves to discovery.
  void CollectFiles() {
    static const std::set<std::string> kNotCounters = {
        "dev",       "uevent",        "core_count",  "connected_devices", "notify_delay",
        "arch_type", "instance_type", "device_name", "lifespan",          "node_type"};
    auto walk = [&](const fs::path& dir) {
      for (const auto& e : fs::recursive_directory_iterator(dir)) {
        if (e.is_regular_file() && !kNotCounters.contains(e.path().filename().string())) {
          files_.push_back(e.path().string());
        }
      }
    };
    for (const NeuronDevice& d : inventory_.devices) walk(paths_.NeuronDevice(d.index));
    for (const EfaInterface& e : inventory_.efas) {
      const fs::path ib = fs::canonical(paths_.InfinibandClassDir() / e.name);
      walk(ib / "hw_counters");
      walk(ib / "ports/1");
    }
  }

  static inline Node* instance_ = nullptr;
  // The node's root under TMPDIR; the singleton is never destroyed, so Cleanup removes it.
  std::unique_ptr<testing::TempDir> dir_;
  RootPaths paths_;
  std::unique_ptr<sim::SimTree> tree_;
  Inventory inventory_;
  std::shared_ptr<testing::FakeDatastores> datastores_ = testing::FakeDatastores::Make();
  std::vector<std::string> files_;
};

// threads 1: all on the caller; 2: the default split (small samples stay on the caller);
// 3: two threads whatever the sample's size.
std::unique_ptr<Sampler> MakeSampler(int64_t mode) {
  SamplerOptions options;
  options.threads = mode == 1 ? 1 : 2;
  if (mode == 3) options.min_files_for_threads = 0;
  options.datastore = Node::Get().datastores();
  return std::make_unique<Sampler>(Node::Get().paths(), Node::Get().inventory(),
                                   std::move(options));
}

void Report(benchmark::State& state, const Snapshot& s) {
  if (!s.errors.empty()) state.SkipWithError(s.errors.front().c_str());
  state.counters["devices"] = static_cast<double>(s.devices.size());
  state.counters["processes"] = static_cast<double>(s.processes.size());
}

void BM_HotSample(benchmark::State& state) {
  auto sampler = MakeSampler(state.range(0));
  sampler->Sample(SampleKind::kFull);
  // `_` is Google Benchmark's loop variable, never read by design: clang-tidy 14 reports a
  // dead store at each such loop in this file, hence the NOLINTs.
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores)
    benchmark::DoNotOptimize(sampler->Sample(SampleKind::kHot));
  }
  Report(state, *sampler->last());
}
BENCHMARK(BM_HotSample)->ArgName("mode")->Arg(1)->Arg(2)->Arg(3)->Unit(benchmark::kMicrosecond);

void BM_FullSweep(benchmark::State& state) {
  auto sampler = MakeSampler(state.range(0));
  sampler->Sample(SampleKind::kFull);
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores)
    benchmark::DoNotOptimize(sampler->Sample(SampleKind::kFull));
  }
  Report(state, *sampler->last());
}
BENCHMARK(BM_FullSweep)->ArgName("mode")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

// The baseline of docs/build.md#file-read-cost: open, read, close every file by absolute path.
void BM_PlainOpenReadClose(benchmark::State& state) {
  const std::vector<std::string>& files = Node::Get().files();
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores)
    benchmark::DoNotOptimize(bench::OpenReadCloseEach(files));
  }
  state.counters["files"] = static_cast<double>(files.size());
}
BENCHMARK(BM_PlainOpenReadClose)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace neuron

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  neuron::Node::CleanupIfCreated();
  return 0;
}
