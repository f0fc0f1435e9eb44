// The cost of the /proc scan by which the agent notices runtimes (ProcReader::HoldersOf,
// docs/architecture.md#noticing-runtimes): one pass over every process's fd/ directory, one
// statx per descriptor, looking for the 16 device numbers of a trn1.32xlarge. N extra processes
// with M descriptors each (dups of /dev/null) are started for each case, so the scan covers
// N x M descriptors plus this machine's own processes (0 x 0: those alone); one of them holds
// /dev/zero, which is among the numbers asked for, so the match path runs too. Reported per scan
// (wall and CPU time), with the processes and descriptors it looked at and the time per descriptor.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "core/proc/procinfo.h"

namespace {

// N children, each holding M descriptors, stopped (SIGKILL) when it goes out of scope.
class Holders {
 public:
  Holders(int processes, int fds) {
    for (int p = 0; p < processes; ++p) {
      int ready[2];
      if (::pipe(ready) != 0) break;
      const pid_t pid = ::fork();
      if (pid == 0) {
        ::close(ready[0]);
        const int base = ::open(p == 0 ? "/dev/zero" : "/dev/null", O_RDONLY);
        for (int i = 1; i < fds; ++i) (void)::dup(base);
        (void)!::write(ready[1], "y", 1);
        for (;;) ::pause();
      }
      ::close(ready[1]);
      char ok = 0;
      (void)!::read(ready[0], &ok, 1);
      ::close(ready[0]);
      if (pid > 0) pids_.push_back(pid);
    }
  }
  ~Holders() {
    for (const pid_t pid : pids_) ::kill(pid, SIGKILL);
    for (const pid_t pid : pids_) ::waitpid(pid, nullptr, 0);
  }
  Holders(const Holders&) = delete;
  Holders& operator=(const Holders&) = delete;

 private:
  std::vector<pid_t> pids_;
};

void BM_HoldersOf(benchmark::State& state) {
  const Holders holders(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  struct stat zero {};
  ::stat("/dev/zero", &zero);
  // A trn1.32xlarge's 16 device numbers: /dev/zero stands in for one, the rest match nothing.
  std::vector<dev_t> devices{zero.st_rdev};
  for (unsigned d = 1; d < 16; ++d) devices.push_back(makedev(4094, d));
  const neuron::ProcReader proc = neuron::ProcReader::AtDirectory("/proc");
  neuron::ProcReader::DeviceHolders last;
  // Google Benchmark's loop variable is never read: clang-analyzer reports a dead store.
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores)
    last = proc.HoldersOf(devices);
    benchmark::DoNotOptimize(last);
  }
  if (state.range(0) > 0 && !last.pids.contains(zero.st_rdev)) {
    state.SkipWithError("the /dev/zero holder was not found");
  }
  state.counters["processes"] = last.processes;
  state.counters["descriptors"] = last.descriptors;
  state.counters["per_descriptor"] = benchmark::Counter(
      static_cast<double>(last.descriptors),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
// Processes x descriptors each: none (this machine as it is), a quiet node (100 x 16) to a
// crowded one (1000 x 64), and a few processes with many files open (100 x 512).
BENCHMARK(BM_HoldersOf)
    ->Args({0, 0})
    ->Args({100, 16})
    ->Args({100, 64})
    ->Args({400, 64})
    ->Args({1000, 64})
    ->Args({100, 512})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
