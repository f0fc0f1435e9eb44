// collective_bench: all-reduce of float32 on simulated trn1.32xlarge nodes, reported as
// nccl-tests reports it (size, count, type, redop, time, algbw, busbw), beside the collective
// model's prediction (driver-sim/runtime/timing.h, CostCollective) and their difference.
//
// Each node is a `neuron-sim up` (tests/support SimNode) with one process on it, started under
// `neuron-sim exec --root NODE` (this program in --child mode): it takes all 32 cores, one thread
// per core, and each core is one rank of the world every node's process joins through
// NEURON_RT_ROOT_COMM_ID (127.0.0.1 and a port found by binding port 0). 1 node is the one-process
// case; 2 and 4 nodes put 64 and 128 ranks in one world (driver-sim/README.md#collectives).
//
// What is measured: each size is one op list holding a single `allreduce` of the buffer, run
// once to warm up (the processes meet there after their start-up) and then --iters times. After
// each execution a rank reads nrtsim_get_core_stats' last_exec_ns, the execution's SIMULATED
// duration, and subtracts the launch (nrtsim_get_model_estimate's compute_ns, which for this op
// list is the launch alone). That leaves the rank's wait for its peers plus the ring. The rank
// that arrived last waited for nobody, so the least of them over every rank is the collective's
// time; the largest less the least ("skew") is how far apart the host threads reached the
// collective, which the model does not cost (driver-sim/README.md#scheduling-and-timing).
// Time is the median over the iterations. algbw = bytes / time; busbw = algbw * 2(n-1)/n,
// n = all ranks (nccl-tests' all-reduce bus bandwidth). The model column is CostCollective for
// 32 ranks per node and the node count; error = (time - model) / model.
//
// Usage: collective_bench [--nodes 1,2,4] [--min-bytes 8] [--max-bytes 268435456]
//                         [--factor 2] [--iters 5]

#include <fmt/format.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench/stats.h"
#include "core/driver/sysfs_names.h"
#include "core/model/catalog.h"
#include "driver-sim/driver/node_info.h"
#include "driver-sim/runtime/node_model.h"
#include "driver-sim/runtime/timing.h"
#include "nrt/nrt.h"
#include "nrt/nrtsim.h"
#include "tests/support/http_client.h"
#include "tests/support/sim_node.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace {

using neuron::bench::Median;

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr int kRanksPerNode = 32;  // trn1.32xlarge's logical cores at LNC 1
constexpr const char* kInstance = "trn1.32xlarge";

struct Options {
  std::vector<int> nodes{1, 2, 4};
  uint64_t min_bytes = 8;
  uint64_t max_bytes = 256ull << 20;
  uint64_t factor = 2;
  int iters = 5;
  // --child only
  int node = -1;
  int node_count = 0;
  std::string comm_id;
};

std::optional<uint64_t> ParseU64(std::string_view s) {
  uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// The buffer sizes: min, min*factor, ... up to max, all multiples of 4 bytes (float32).
std::vector<uint64_t> Sizes(const Options& o) {
  std::vector<uint64_t> out;
  for (uint64_t s = o.min_bytes; s <= o.max_bytes; s *= o.factor) {
    out.push_back(s);
    if (s > o.max_bytes / o.factor) break;  // the next would pass max (or overflow)
  }
  return out;
}

// Parses the flags; an error message, or "" when they are good.
std::string ParseFlags(int argc, char** argv, Options* o, bool* child) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--child") {
      *child = true;
      continue;
    }
    if (i + 1 >= argc) return fmt::format("{} needs a value", flag);
    const std::string_view value = argv[++i];
    const std::optional<uint64_t> n = ParseU64(value);
    if (flag == "--nodes") {
      o->nodes.clear();
      std::stringstream in{std::string(value)};
      for (std::string part; std::getline(in, part, ',');) {
        const std::optional<uint64_t> v = ParseU64(part);
        if (!v || *v < 1 || *v > 64) return fmt::format("--nodes: bad node count \"{}\"", part);
        o->nodes.push_back(static_cast<int>(*v));
      }
    } else if (flag == "--comm-id") {
      o->comm_id = value;
    } else if (!n) {
      return fmt::format("{}: expected a non-negative integer, got \"{}\"", flag, value);
    } else if (flag == "--min-bytes") {
      o->min_bytes = *n;
    } else if (flag == "--max-bytes") {
      o->max_bytes = *n;
    } else if (flag == "--factor") {
      o->factor = *n;
    } else if (flag == "--iters") {
      if (*n < 1 || *n > 1000) return "--iters: 1 to 1000";
      o->iters = static_cast<int>(*n);
    } else if (flag == "--node") {
      o->node = static_cast<int>(std::min<uint64_t>(*n, 1 << 20));
    } else if (flag == "--node-count") {
      o->node_count = static_cast<int>(std::min<uint64_t>(*n, 1 << 20));
    } else {
      return fmt::format("unknown flag {}", flag);
    }
  }
  if (o->min_bytes < 4 || o->min_bytes % 4 != 0) return "--min-bytes: a multiple of 4, >= 4";
  if (o->factor < 2) return "--factor: at least 2";
  if (o->max_bytes < o->min_bytes) return "--max-bytes: at least --min-bytes";
  if (*child && (o->node < 0 || o->node >= o->node_count || o->comm_id.empty())) {
    return "--child needs --node I, --node-count M (I < M) and --comm-id HOST:PORT";
  }
  return "";
}

// ---- The child: one node's process, 32 ranks ----

// One rank's models (one per size) and its measurements, [size][iteration] in ns.
struct Rank {
  uint32_t vnc = 0;
  uint32_t rank = 0;
  std::vector<nrt_model_t*> models;
  std::vector<int64_t> launch_ns;
  std::vector<std::vector<int64_t>> ns;
  std::string error;
};

std::string LoadModels(Rank& r, const std::vector<uint64_t>& sizes, uint32_t world) {
  for (const uint64_t bytes : sizes) {
    const std::string ops =
        fmt::format(R"({{"version": 1, "ops": [{{"op": "allreduce", "bytes": {}}}]}})", bytes);
    const std::string name = fmt::format("allreduce-{}", bytes);
    nrtsim_neff_options_t options{};
    options.name = name.c_str();
    void* neff = nullptr;
    size_t size = 0;
    if (nrtsim_build_neff(ops.c_str(), &options, &neff, &size) != NRT_SUCCESS) {
      return fmt::format("building {}: {}", name, nrtsim_last_error());
    }
    nrt_model_t* model = nullptr;
    const NRT_STATUS s =
        nrt_load_collectives(neff, size, static_cast<int32_t>(r.vnc), -1, r.rank, world, &model);
    nrtsim_free_neff(neff);
    if (s != NRT_SUCCESS) {
      return fmt::format("loading {}: {} {}", name, nrt_get_status_as_str(s), nrtsim_last_error());
    }
    r.models.push_back(model);
    nrtsim_model_estimate_t e{};
    if (nrtsim_get_model_estimate(model, &e) != NRT_SUCCESS) return "no estimate for " + name;
    r.launch_ns.push_back(static_cast<int64_t>(e.compute_ns));
  }
  return "";
}

// Runs every size (a warm-up, then `iters` timed executions) on the rank's core. Stops at the
// first failure, or when another rank of the process failed (its peers would wait for it).
void RunRank(Rank& r, const Options& o, std::atomic<bool>& failed) {
  const std::vector<uint64_t> sizes = Sizes(o);
  nrt_tensor_set_t* in = nullptr;
  nrt_tensor_set_t* out = nullptr;
  if (nrt_allocate_tensor_set(&in) != NRT_SUCCESS || nrt_allocate_tensor_set(&out) != NRT_SUCCESS) {
    r.error = "cannot allocate tensor sets";
  }
  r.ns.assign(sizes.size(), {});
  for (size_t s = 0; r.error.empty() && s < sizes.size(); ++s) {
    for (int i = 0; i <= o.iters && r.error.empty(); ++i) {
      if (failed.load()) {
        r.error = "stopped: another rank failed";
        break;
      }
      if (NRT_STATUS st = nrt_execute(r.models[s], in, out); st != NRT_SUCCESS) {
        r.error = fmt::format("{} B: nrt_execute: {}", sizes[s], nrt_get_status_as_str(st));
        break;
      }
      nrtsim_core_stats_t stats{};
      if (nrtsim_get_core_stats(r.vnc, &stats) != NRT_SUCCESS) r.error = "no core stats";
      if (i > 0) r.ns[s].push_back(static_cast<int64_t>(stats.last_exec_ns) - r.launch_ns[s]);
    }
  }
  if (!r.error.empty()) failed.store(true);
  nrt_destroy_tensor_set(&in);
  nrt_destroy_tensor_set(&out);
}

// `fn` on every rank, one thread each (a rank's core runs on its caller's thread), until all
// return; false when a rank reported an error (each is printed).
template <typename Fn>
bool OnEveryRank(std::vector<Rank>& ranks, int node, Fn fn) {
  std::vector<std::thread> threads;
  threads.reserve(ranks.size());
  for (Rank& r : ranks) threads.emplace_back([&fn, &r] { fn(r); });
  for (std::thread& t : threads) t.join();
  bool ok = true;
  for (const Rank& r : ranks) {
    if (r.error.empty()) continue;
    fmt::print(stderr, "node {} rank {}: {}\n", node, r.rank, r.error);
    ok = false;
  }
  return ok;
}

// Prints, per size and iteration, the least and the largest collective time over the ranks:
// "R <bytes> <iteration> <min ns> <max ns>".
int Child(const Options& o) {
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0,
        0);  // as neuron-sim run does (driver-sim/README.md#workloads)
  setenv("NEURON_RT_ROOT_COMM_ID", o.comm_id.c_str(), 1);
  if (NRT_STATUS s = nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""); s != NRT_SUCCESS) {
    fmt::print(stderr, "node {}: nrt_init: {}\n", o.node, nrt_get_status_as_str(s));
    return 1;
  }
  uint32_t cores = 0;
  nrt_get_visible_vnc_count(&cores);
  if (cores != kRanksPerNode) {
    fmt::print(stderr, "node {}: {} cores visible, expected {}\n", o.node, cores, kRanksPerNode);
    nrt_close();
    return 1;
  }
  const auto world = static_cast<uint32_t>(kRanksPerNode * o.node_count);
  std::vector<Rank> ranks(kRanksPerNode);
  for (uint32_t v = 0; v < kRanksPerNode; ++v) {
    ranks[v].vnc = v;
    ranks[v].rank = static_cast<uint32_t>(o.node) * kRanksPerNode + v;
  }
  // Every rank loads before any executes: a rank that failed to load would leave its peers
  // waiting in their first collective until the timeout.
  const std::vector<uint64_t> sizes = Sizes(o);
  std::atomic<bool> failed{false};
  int rc = OnEveryRank(ranks, o.node, [&](Rank& r) { r.error = LoadModels(r, sizes, world); }) &&
                   OnEveryRank(ranks, o.node, [&](Rank& r) { RunRank(r, o, failed); })
               ? 0
               : 1;
  for (size_t s = 0; rc == 0 && s < sizes.size(); ++s) {
    for (int i = 0; i < o.iters; ++i) {
      int64_t lo = INT64_MAX;
      int64_t hi = INT64_MIN;
      for (const Rank& r : ranks) {
        lo = std::min(lo, r.ns[s][static_cast<size_t>(i)]);
        hi = std::max(hi, r.ns[s][static_cast<size_t>(i)]);
      }
      fmt::print("R {} {} {} {}\n", sizes[s], i, lo, hi);
    }
  }
  for (const Rank& r : ranks) {
    for (nrt_model_t* m : r.models) nrt_unload(m);
  }
  nrt_close();
  return rc;
}

// ---- The parent: the nodes, the children, the table ----

// Per size: the collective time of each iteration (least over all ranks of all nodes) and the
// skew (largest less least).
struct Samples {
  std::map<uint64_t, std::vector<double>> time_us;
  std::map<uint64_t, std::vector<double>> skew_us;
};

// Folds one child's "R" lines into the per-(size, iteration) minimum and maximum.
void Fold(const std::string& out,
          std::map<std::pair<uint64_t, int>, std::pair<int64_t, int64_t>>* m) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string tag;
    uint64_t bytes = 0;
    int iter = 0;
    int64_t lo = 0;
    int64_t hi = 0;
    if (!(fields >> tag >> bytes >> iter >> lo >> hi) || tag != "R") continue;
    auto [it, fresh] = m->try_emplace({bytes, iter}, lo, hi);
    if (!fresh) {
      it->second.first = std::min<int64_t>(it->second.first, lo);
      it->second.second = std::max<int64_t>(it->second.second, hi);
    }
  }
}

std::string Tail(const std::string& text, size_t max) {
  return text.size() <= max ? text : "..." + text.substr(text.size() - max);
}

// Starts `nodes` simulated nodes and one child per node; the samples, or an error message.
std::optional<Samples> RunNodes(const Options& o, int nodes, const fs::path& self,
                                std::string* error) {
  const neuron::testing::TempDir dir("collective_bench");
  std::vector<std::unique_ptr<neuron::testing::SimNode>> sims;
  for (int i = 0; i < nodes; ++i) {
    sims.push_back(std::make_unique<neuron::testing::SimNode>(
        neuron::testing::SimNodeOptions{.sim_bin = NEURON_SIM_BIN,
                                        .root = dir.path() / fmt::format("node{}", i),
                                        .logs = dir.path() / "logs",
                                        .log_name = fmt::format("up{}", i)}));
    if (!sims.back()->Up(kInstance)) {
      *error = fmt::format("node {}: {}", i, sims.back()->Log());
      return std::nullopt;
    }
  }
  // Free a moment ago (bound with port 0 and released) for rank 0's process to listen on.
  const int port = neuron::testing::FreePort();
  if (port <= 0) {
    *error = "no free port on 127.0.0.1";
    return std::nullopt;
  }
  std::vector<pid_t> kids;
  for (int i = 0; i < nodes; ++i) {
    const std::vector<std::string> args = sims[static_cast<size_t>(i)]->UnderDriver(
        {self.string(), "--child", "--node", std::to_string(i), "--node-count",
         std::to_string(nodes), "--comm-id", fmt::format("127.0.0.1:{}", port), "--min-bytes",
         std::to_string(o.min_bytes), "--max-bytes", std::to_string(o.max_bytes), "--factor",
         std::to_string(o.factor), "--iters", std::to_string(o.iters)});
    // The processes start one after another and meet at the warm-up collective: give them
    // longer than the default 30 s to get there.
    kids.push_back(neuron::testing::StartProcess(args, dir.path() / fmt::format("child{}.out", i),
                                                 dir.path() / fmt::format("child{}.err", i),
                                                 {"NEURON_RT_EXEC_TIMEOUT=300"}, error));
    if (kids.back() <= 0) return std::nullopt;
  }
  std::map<std::pair<uint64_t, int>, std::pair<int64_t, int64_t>> folded;
  for (int i = 0; i < nodes; ++i) {
    const std::optional<int> code = neuron::testing::WaitExit(kids[static_cast<size_t>(i)], 3600s);
    if (!code) neuron::testing::Stop(kids[static_cast<size_t>(i)], 10s);
    const fs::path base = dir.path() / fmt::format("child{}", i);
    if (code != 0) {
      *error += fmt::format("node {} process exited with {}:\n{}\n", i,
                            code ? std::to_string(*code) : "no exit within an hour",
                            Tail(neuron::testing::ReadFile(base.string() + ".err"), 2000));
      continue;
    }
    Fold(neuron::testing::ReadFile(base.string() + ".out"), &folded);
  }
  if (!error->empty()) return std::nullopt;
  Samples s;
  for (const auto& [key, lohi] : folded) {
    s.time_us[key.first].push_back(static_cast<double>(lohi.first) / 1e3);
    s.skew_us[key.first].push_back(static_cast<double>(lohi.second - lohi.first) / 1e3);
  }
  return s;
}

void PrintTable(const Options& o, int nodes, const Samples& s, const neuron::nrt::NodeModel& node) {
  const int n = kRanksPerNode * nodes;
  const double bus_factor = 2.0 * (n - 1) / n;
  fmt::print("# {} x {}, {} ranks per node, {} ranks; median of {} iterations (simulated time)\n",
             nodes, kInstance, kRanksPerNode, n, o.iters);
  fmt::print("#{:>11} {:>12} {:>6} {:>6} {:>10} {:>8} {:>8} {:>10} {:>8} {:>9}\n", "size", "count",
             "type", "redop", "time", "algbw", "busbw", "model", "error", "skew");
  fmt::print("#{:>11} {:>12} {:>6} {:>6} {:>10} {:>8} {:>8} {:>10} {:>8} {:>9}\n", "(B)",
             "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "time(us)", "%", "(us)");
  for (const uint64_t bytes : Sizes(o)) {
    const auto t = s.time_us.find(bytes);
    if (t == s.time_us.end() || t->second.empty()) {
      fmt::print("{:>12} {:>12} {:>6} {:>6} {:>10}\n", bytes, bytes / 4, "float", "sum", "absent");
      continue;
    }
    const double us = Median(t->second);
    const double model_us =
        static_cast<double>(neuron::nrt::CostCollective(neuron::nrt::CollKind::kAllReduce,
                                                        static_cast<double>(bytes), kRanksPerNode,
                                                        static_cast<uint64_t>(nodes),
                                                        neuron::nrt::PathFor(node))
                                .ns) /
        1e3;
    const double algbw = us > 0 ? static_cast<double>(bytes) / (us * 1e-6) / 1e9 : 0;
    fmt::print(
        "{:>12} {:>12} {:>6} {:>6} {:>10.2f} {:>8.3f} {:>8.3f} {:>10.2f} {:>+8.2f} {:>9.1f}\n",
        bytes, bytes / 4, "float", "sum", us, algbw, algbw * bus_factor, model_us,
        (us - model_us) / model_us * 100, Median(s.skew_us.at(bytes)));
  }
}

int Parent(const Options& o) {
  const fs::path self = fs::read_symlink("/proc/self/exe");
  absl::StatusOr<const neuron::InstanceSpec*> spec = neuron::FindInstance(kInstance);
  if (!spec.ok()) {
    fmt::print(stderr, "{}\n", spec.status().ToString());
    return 1;
  }
  neuron::NodeInfo info;
  info.instance_type = kInstance;
  const neuron::nrt::NodeModel node(neuron::RootPaths("/"), info, *spec, 1);
  fmt::print(
      "all-reduce, float32 sum, on simulated {} nodes; time = the collective's simulated time "
      "(last_exec_ns less the launch, least over all ranks), model = CostCollective\n",
      kInstance);
  for (const int nodes : o.nodes) {
    const auto t0 = std::chrono::steady_clock::now();
    std::string error;
    const std::optional<Samples> s = RunNodes(o, nodes, self, &error);
    if (!s) {
      fmt::print(stderr, "collective_bench: {} node(s): {}\n", nodes, error);
      return 1;
    }
    PrintTable(o, nodes, *s, node);
    fmt::print("# wall time {:.1f} s\n\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  bool child = false;
  if (const std::string e = ParseFlags(argc, argv, &o, &child); !e.empty()) {
    fmt::print(stderr, "collective_bench: {}\n", e);
    return 2;
  }
  return child ? Child(o) : Parent(o);
}
