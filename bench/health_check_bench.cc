// neuron-ls --health-check's wall time on a simulated trn1.32xlarge (16 devices, 32 cores, 32
// NeuronLinks): `neuron-sim up`, the programs of `neuron-sim health-programs`, then the whole
// check under `neuron-sim exec` with the simulator's full libnrt.so.1, --runs times (default 5).
// Prints each run and the median (target <= 10 s, docs/OPERATIONS.md#active-check). Every run
// after the first compares against the baseline the first recorded.
//
//   health_check_bench [--runs N]

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/stats.h"
#include "tests/support/sim_node.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

int main(int argc, char** argv) {
  int runs = 5;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--runs") == 0)
      runs = std::max(1, static_cast<int>(std::strtol(argv[i + 1], nullptr, 10)));
  }
  neuron::testing::TempDir dir("health-check-bench");
  neuron::testing::SimNode node(
      {.sim_bin = NEURON_SIM_BIN, .root = dir.path() / "root", .logs = dir.path()});
  if (!node.Up("trn1.32xlarge")) {
    std::fprintf(stderr, "neuron-sim up failed: %s\n", node.Log().c_str());
    return 1;
  }
  const std::string programs = (dir.path() / "programs").string();
  const neuron::testing::RunResult w = neuron::testing::RunCommand(
      dir.path(), {NEURON_SIM_BIN, "health-programs", "--out", programs});
  if (w.code != 0) {
    std::fprintf(stderr, "neuron-sim health-programs failed: %s\n", w.err.c_str());
    return 1;
  }
  const std::vector<std::string> check = node.UnderDriver(
      {NEURON_LS_BIN, "--root", node.root().string(), "--health-check", "--programs", programs,
       "--state-dir", (dir.path() / "state").string(), "--libnrt", NEURON_LIBNRT_FULL, "--agent",
       "unix:" + (dir.path() / "no-agent.sock").string()});
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const neuron::testing::RunResult r =
        neuron::testing::RunCommand(dir.path(), check, {}, std::chrono::seconds(120));
    ms.push_back(neuron::bench::Ms(std::chrono::steady_clock::now() - start));
    if (r.code != 0) {
      std::fprintf(stderr, "run %d: exit %d\n%s%s", i + 1, r.code, r.out.c_str(), r.err.c_str());
      return 1;
    }
    std::printf("run %d: %.2f s\n", i + 1, ms.back() / 1000);
  }
  std::printf(
      "health check, trn1.32xlarge (16 devices, 32 cores, 32 links): median %.2f s over "
      "%d runs (target <= 10 s)\n",
      neuron::bench::Median(ms) / 1000, runs);
  return 0;
}
