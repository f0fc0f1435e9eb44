// events_bench: on a simulated trn2.48xlarge,
//   1. the delay from SimTree::RemoveDevice to the DeviceRemoved event (and from AddDevice to
//      DeviceAdded) over many unplug/plug cycles, directory watch mode; target p99 <= 100 ms;
//   2. Google Benchmark of Discovery::Scan, directory back end (target <= 5 ms), and the libudev
//      back end too when run under umockdev's preload (LD_PRELOAD=libumockdev-preload.so.0).
//
// Usage: events_bench [--cycles=N] [--root=DIR] [benchmark flags]
//   --root reuses an existing simulated trn2.48xlarge root instead of building one (slow disks
//   take tens of seconds to write its 13,500 files).

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "core/catalog.h"
#include "core/events.h"
#include "core/inventory.h"
#include "driver-sim/sim_tree.h"

namespace neuron {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

fs::path g_root;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

// Waits for the next event of `kind` for `device`, returning when the callback saw it.
class Waiter {
 public:
  void OnEvent(const Event& e) {
    const Clock::time_point now = Clock::now();
    std::lock_guard<std::mutex> lock(mu_);
    if (e.kind == kind_ && e.device == device_ && !seen_) {
      seen_ = now;
      cv_.notify_all();
    }
  }
  void Expect(EventKind kind, int device) {
    std::lock_guard<std::mutex> lock(mu_);
    kind_ = kind;
    device_ = device;
    seen_.reset();
  }
  std::optional<Clock::time_point> Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return seen_.has_value(); });
    return seen_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  EventKind kind_ = EventKind::kDeviceRemoved;
  int device_ = -1;
  std::optional<Clock::time_point> seen_;
};

int RunLatency(sim::SimTree& tree, int cycles) {
  EventsOptions options;  // defaults: directory mode, 100 ms state poll, 1 s rescan
  options.watch_kmsg = false;
  Events events(tree.paths(), options);
  Waiter waiter;
  events.Subscribe([&](const Event& e) { waiter.OnEvent(e); });
  if (absl::Status s = events.Start(); !s.ok()) {
    std::fprintf(stderr, "Events::Start: %s\n", s.ToString().c_str());
    return 1;
  }
  std::vector<double> removed_ms, added_ms, remove_call_ms;
  int missed = 0;
  for (int i = 0; i < cycles; ++i) {
    const int device = i % 16;
    waiter.Expect(EventKind::kDeviceRemoved, device);
    const Clock::time_point t0 = Clock::now();
    if (!tree.RemoveDevice(device).ok()) return 1;
    remove_call_ms.push_back(Ms(Clock::now() - t0));
    if (std::optional<Clock::time_point> t = waiter.Wait()) {
      removed_ms.push_back(Ms(*t - t0));
    } else {
      ++missed;
    }
    waiter.Expect(EventKind::kDeviceAdded, device);
    const Clock::time_point t1 = Clock::now();
    if (!tree.AddDevice(device).ok()) return 1;
    if (std::optional<Clock::time_point> t = waiter.Wait()) {
      added_ms.push_back(Ms(*t - t1));
    } else {
      ++missed;
    }
  }
  events.Stop();
  std::printf("unplug/plug cycles: %d on trn2.48xlarge (directory mode, inotify + 100 ms poll)\n",
              cycles);
  std::printf("  RemoveDevice -> DeviceRemoved: median %.2f ms  p99 %.2f ms  max %.2f ms\n",
              Percentile(removed_ms, 0.5), Percentile(removed_ms, 0.99),
              Percentile(removed_ms, 1.0));
  std::printf("  AddDevice    -> DeviceAdded:   median %.2f ms  p99 %.2f ms  max %.2f ms\n",
              Percentile(added_ms, 0.5), Percentile(added_ms, 0.99), Percentile(added_ms, 1.0));
  std::printf("  (RemoveDevice call itself: median %.2f ms; events missed: %d)\n",
              Percentile(remove_call_ms, 0.5), missed);
  return missed == 0 ? 0 : 1;
}

void BM_DirectoryScan(benchmark::State& state) {
  std::unique_ptr<Discovery> d = MakeDirectoryDiscovery(RootPaths(g_root), {});
  size_t devices = 0;
  for (auto _ : state) {
    absl::StatusOr<Inventory> inv = d->Scan();
    if (!inv.ok()) state.SkipWithError(std::string(inv.status().message()).c_str());
    devices = inv.ok() ? inv->devices.size() : 0;
    benchmark::DoNotOptimize(inv);
  }
  state.counters["devices"] = static_cast<double>(devices);
}
BENCHMARK(BM_DirectoryScan)->Unit(benchmark::kMillisecond);

void BM_UdevScan(benchmark::State& state) {
  ::setenv("UMOCKDEV_DIR", g_root.c_str(), 1);
  absl::StatusOr<std::unique_ptr<Discovery>> d = MakeUdevDiscovery(RootPaths(g_root), {});
  if (!d.ok()) {
    state.SkipWithError(std::string(d.status().message()).c_str());
    return;
  }
  size_t devices = 0;
  for (auto _ : state) {
    absl::StatusOr<Inventory> inv = (*d)->Scan();
    devices = inv.ok() ? inv->devices.size() : 0;
    benchmark::DoNotOptimize(inv);
  }
  state.counters["devices"] = static_cast<double>(devices);
  ::unsetenv("UMOCKDEV_DIR");
}

}  // namespace
}  // namespace neuron

int main(int argc, char** argv) {
  using namespace neuron;
  int cycles = 200;
  std::string reuse;
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--cycles=", 9) == 0) {
      cycles = std::atoi(argv[i] + 9);
    } else if (std::strncmp(argv[i], "--root=", 7) == 0) {
      reuse = argv[i] + 7;
    } else {
      rest.push_back(argv[i]);
    }
  }
  absl::StatusOr<const InstanceSpec*> spec = FindInstance("trn2.48xlarge");
  std::string tmp;
  if (reuse.empty()) {
    char tmpl[] = "/tmp/events_bench.XXXXXX";
    tmp = ::mkdtemp(tmpl);
    g_root = tmp;
  } else {
    g_root = reuse;
  }
  sim::SimTree tree(RootPaths(g_root), sim::NodeConfig{*spec, 2, "", ""});
  if (reuse.empty()) {
    const Clock::time_point t0 = Clock::now();
    if (absl::Status s = tree.Create(); !s.ok()) {
      std::fprintf(stderr, "SimTree::Create: %s\n", s.ToString().c_str());
      return 1;
    }
    std::printf("built a trn2.48xlarge tree in %.0f ms\n", Ms(Clock::now() - t0));
  }
  int rc = cycles > 0 ? RunLatency(tree, cycles) : 0;

  const char* preload = std::getenv("LD_PRELOAD");
  if (preload != nullptr && std::strstr(preload, "libumockdev-preload") != nullptr) {
    benchmark::RegisterBenchmark("BM_UdevScan", BM_UdevScan)->Unit(benchmark::kMillisecond);
  }
  int bargc = static_cast<int>(rest.size());
  benchmark::Initialize(&bargc, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (!tmp.empty()) fs::remove_all(tmp);
  return rc;
}
