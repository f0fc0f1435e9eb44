// events_bench: on a simulated trn2.48xlarge served by the real node daemon,
//   1. the delay from sending `ctl unplug` over ctl.sock to the DeviceRemoved event (and from
//      `ctl plug` to DeviceAdded) over many cycles, directory watch mode; target p99 <= 100 ms;
//   2. Google Benchmark of Discovery::Scan, directory back end (target <= 5 ms), and the libudev
//      back end too when run under umockdev's preload (LD_PRELOAD=libumockdev-preload.so.0).
//
// Usage: events_bench [--cycles=N] [benchmark flags]. The tree goes under $TMPDIR.

#include <benchmark/benchmark.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/stats.h"
#include "core/discovery/inventory.h"
#include "core/events/events.h"
#include "core/model/catalog.h"
#include "driver-sim/driver/ctl.h"
#include "driver-sim/driver/daemon.h"
#include "driver-sim/driver/sim_paths.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

using neuron::bench::Ms;
using neuron::bench::Percentile;

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

fs::path g_root;

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

// The node daemon in a child process, as `neuron-sim up` runs it; nullopt if it never got ready.
std::optional<pid_t> StartDaemon(const fs::path& root, const InstanceSpec* spec) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    spdlog::set_level(spdlog::level::warn);  // one info line per ctl command would flood the report
    sim::DaemonOptions options;
    options.root = root;
    options.spec = spec;
    options.lnc = 2;
    sim::NodeDaemon daemon(options);
    if (!daemon.Start().ok() || !daemon.Run().ok()) _exit(1);
    _exit(daemon.Shutdown().ok() ? 0 : 1);
  }
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(120);
  while (!fs::exists(neuron::sim::SimReadyPath(RootPaths(root)))) {
    if (Clock::now() > deadline || ::waitpid(pid, nullptr, WNOHANG) == pid) return std::nullopt;
    ::usleep(20000);
  }
  return pid;
}

int RunLatency(const RootPaths& paths, int cycles) {
  EventsOptions options;  // defaults: directory mode, 100 ms state poll, 1 s rescan
  options.watch_kmsg = false;
  Events events(paths, options);
  Waiter waiter;
  events.Subscribe([&](const Event& e) { waiter.OnEvent(e); });
  if (absl::Status s = events.Start(); !s.ok()) {
    std::fprintf(stderr, "Events::Start: %s\n", s.ToString().c_str());
    return 1;
  }
  auto ctl = [&](std::string command, int device) {
    sim::CtlRequest request;
    request.command = std::move(command);
    request.device = device;
    absl::StatusOr<sim::CtlReply> reply =
        sim::SendCtlRequest(paths, request, std::chrono::seconds(10));
    return reply.ok() && reply->outcome == sim::CtlOutcome::kOk;
  };
  std::vector<double> removed_ms, added_ms;
  int missed = 0;
  for (int i = 0; i < cycles; ++i) {
    const int device = i % 16;
    waiter.Expect(EventKind::kDeviceRemoved, device);
    const Clock::time_point t0 = Clock::now();
    if (!ctl("unplug", device)) return 1;
    if (std::optional<Clock::time_point> t = waiter.Wait()) {
      removed_ms.push_back(Ms(*t - t0));
    } else {
      ++missed;
    }
    waiter.Expect(EventKind::kDeviceAdded, device);
    const Clock::time_point t1 = Clock::now();
    if (!ctl("plug", device)) return 1;
    if (std::optional<Clock::time_point> t = waiter.Wait()) {
      added_ms.push_back(Ms(*t - t1));
    } else {
      ++missed;
    }
  }
  events.Stop();
  std::printf("unplug/plug cycles: %d on trn2.48xlarge (directory mode, inotify + 100 ms poll)\n",
              cycles);
  std::printf("  ctl unplug -> DeviceRemoved: median %.2f ms  p99 %.2f ms  max %.2f ms\n",
              Percentile(removed_ms, 0.5), Percentile(removed_ms, 0.99),
              Percentile(removed_ms, 1.0));
  std::printf("  ctl plug   -> DeviceAdded:   median %.2f ms  p99 %.2f ms  max %.2f ms\n",
              Percentile(added_ms, 0.5), Percentile(added_ms, 0.99), Percentile(added_ms, 1.0));
  std::printf("  events missed: %d\n", missed);
  return missed == 0 ? 0 : 1;
}

void BM_DirectoryScan(benchmark::State& state) {
  std::unique_ptr<Discovery> d = MakeDirectoryDiscovery(RootPaths(g_root), {});
  size_t devices = 0;
  // `_` is Google Benchmark's loop variable, never read by design: clang-tidy 14 reports a
  // dead store at each such loop in this file, hence the NOLINTs.
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores)
    absl::StatusOr<Inventory> inv = d->Scan();
    if (!inv.ok()) state.SkipWithError(std::string{inv.status().message()}.c_str());
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
    state.SkipWithError(std::string{d.status().message()}.c_str());
    return;
  }
  size_t devices = 0;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores)
    absl::StatusOr<Inventory> inv = (*d)->Scan();
    devices = inv.ok() ? inv->devices.size() : 0;
    benchmark::DoNotOptimize(inv);
  }
  state.counters["devices"] = static_cast<double>(devices);
  ::unsetenv("UMOCKDEV_DIR");
}

// The value of --cycles=N: an integer >= 0 (0: no latency cycles), or nullopt.
std::optional<int> ParseCycles(std::string_view text) {
  int v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || v < 0) {
    return std::nullopt;
  }
  return v;
}

}  // namespace
}  // namespace neuron

int main(int argc, char** argv) {
  using neuron::BM_UdevScan;
  using neuron::Clock;
  using neuron::FindInstance;
  using neuron::g_root;
  using neuron::Ms;
  using neuron::RootPaths;
  using neuron::RunLatency;
  using neuron::StartDaemon;
  int cycles = 200;
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--cycles=", 9) == 0) {
      const std::optional<int> parsed = neuron::ParseCycles(argv[i] + 9);
      if (!parsed) {
        std::fprintf(stderr, "events_bench: --cycles wants a non-negative integer, got \"%s\"\n",
                     argv[i] + 9);
        return 2;
      }
      cycles = *parsed;
    } else {
      rest.push_back(argv[i]);
    }
  }
  const neuron::testing::TempDir dir("events_bench");
  g_root = dir.path();
  const Clock::time_point t0 = Clock::now();
  std::optional<pid_t> daemon = StartDaemon(g_root, *FindInstance("trn2.48xlarge"));
  if (!daemon) {
    std::fprintf(stderr, "the node daemon did not get ready under %s\n", g_root.c_str());
    return 1;
  }
  std::printf("node daemon ready with a trn2.48xlarge tree in %.0f ms\n", Ms(Clock::now() - t0));
  int rc = cycles > 0 ? RunLatency(RootPaths(g_root), cycles) : 0;

  const char* preload = std::getenv("LD_PRELOAD");
  if (preload != nullptr && std::strstr(preload, "libumockdev-preload") != nullptr) {
    benchmark::RegisterBenchmark("BM_UdevScan", BM_UdevScan)->Unit(benchmark::kMillisecond);
  }
  int bargc = static_cast<int>(rest.size());
  benchmark::Initialize(&bargc, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  ::kill(*daemon, SIGTERM);
  ::waitpid(*daemon, nullptr, 0);
  return rc;
}
