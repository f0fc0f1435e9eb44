// neuron-exporter cost on a simulated trn2.48xlarge (16 devices, 64 logical cores at LNC 2)
// under `neuron-sim run --workload matmul` on half the cores, and the same figures for Debian's
// prometheus-node-exporter (default collectors) on this machine. Prints medians and p99:
//   1. a scrape that reads everything (--share-window-ms 0 --full-sweep-ms 0; target p99 <= 25 ms);
//   2. a hot scrape (share window 0, default 10 s full sweep): what a lone Prometheus pays;
//   3. a scrape served from a fresh shared snapshot (default 1 s window; target p99 <= 5 ms);
//   4. exporter RSS after the runs (target <= 24 MiB) and CPU per scrape (utime + stime);
//   5. the DaemonSet's split (docs/architecture.md#privilege-split): the shared scrape through
//      the unprivileged front, the collector behind it on a Unix socket (target p99 <= 5 ms),
//      and the front's RSS;
//   6. node_exporter: scrape latency, RSS, CPU per scrape; ratios.
//
//   monitor_bench [--scrapes N]

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench/stats.h"
#include "core/base/guarded_main.h"
#include "core/base/unique_fd.h"
#include "tests/support/http_client.h"

namespace {

using neuron::bench::Median;
using neuron::bench::Percentile;

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

pid_t Start(const std::vector<std::string>& args, const fs::path& out,
            const std::vector<std::string>& extra_env = {}) {
  std::vector<std::string> env_store;
  for (char** e = environ; *e != nullptr; ++e) env_store.emplace_back(*e);
  for (const auto& e : extra_env) env_store.push_back(e);
  std::vector<char*> envp;
  envp.reserve(env_store.size() + 1);
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  std::vector<std::string> copy = args;
  argv.reserve(copy.size() + 1);
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = -1;
  if (posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), envp.data()) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

void StopPid(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  for (int i = 0; i < 300; ++i) {
    if (waitpid(pid, nullptr, WNOHANG) == pid) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

std::string Slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool WaitFor(const std::function<bool()>& pred, std::chrono::seconds ceiling) {
  const auto end = Clock::now() + ceiling;
  while (Clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return pred();
}

// GET /metrics over a fresh connection; returns the body size, or -1.
int64_t Scrape(int port) {
  const neuron::UniqueFd fd(socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return -1;
  const std::string req = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
  if (send(fd.get(), req.data(), req.size(), MSG_NOSIGNAL) < 0) return -1;
  int64_t total = 0;
  char buf[65536];
  for (;;) {
    pollfd p{fd.get(), POLLIN, 0};
    if (poll(&p, 1, 20000) <= 0) break;
    const ssize_t n = recv(fd.get(), buf, sizeof buf, 0);
    if (n <= 0) break;
    total += n;
  }
  return total;
}

struct ProcCost {
  int64_t rss_kib = -1;
  double cpu_s = 0;
};
ProcCost Cost(pid_t pid) {
  ProcCost c;
  std::ifstream st("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(st, line)) {
    if (line.rfind("VmRSS:", 0) == 0) c.rss_kib = std::stol(line.substr(6));
  }
  const std::string stat = Slurp("/proc/" + std::to_string(pid) + "/stat");
  const size_t close_paren = stat.rfind(')');
  std::istringstream in(stat.substr(close_paren + 2));
  std::vector<std::string> f;
  std::string tok;
  while (in >> tok) f.push_back(tok);
  if (f.size() > 13) {
    c.cpu_s = static_cast<double>(std::stoull(f[11]) + std::stoull(f[12])) /
              static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  return c;
}

struct Figures {
  double median_ms = 0, p99_ms = 0, cpu_ms_per_scrape = 0;
  int64_t bytes = 0;
};

// `scrapes` scrapes; with `burst` > 0, bursts of that many back to back then a pause of
// `pause`, the first of each burst excluded (it takes the sample the others share).
Figures Measure(pid_t pid, int port, int scrapes, int burst = 0,
                std::chrono::milliseconds pause = std::chrono::milliseconds(0)) {
  Figures f;
  std::vector<double> ms;
  const ProcCost before = Cost(pid);
  int taken = 0;
  while (taken < scrapes) {
    if (burst > 0) {
      Scrape(port);  // takes the sample
      for (int i = 0; i < burst && taken < scrapes; ++i, ++taken) {
        const auto t0 = Clock::now();
        f.bytes = Scrape(port);
        ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      }
      std::this_thread::sleep_for(pause);
    } else {
      const auto t0 = Clock::now();
      f.bytes = Scrape(port);
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      ++taken;
    }
  }
  const ProcCost after = Cost(pid);
  f.median_ms = Median(ms);
  f.p99_ms = Percentile(ms, 0.99);
  f.cpu_ms_per_scrape = (after.cpu_s - before.cpu_s) * 1000 / std::max(1, taken);
  return f;
}

int PortFromLog(const fs::path& log) {
  static const std::regex kPort("listening on port ([0-9]+)");
  int port = 0;
  WaitFor(
      [&] {
        std::smatch m;
        const std::string text = Slurp(log);
        if (!std::regex_search(text, m, kPort)) return false;
        port = std::stoi(m[1]);
        return true;
      },
      std::chrono::seconds(60));
  return port;
}

// The DaemonSet's split: the collector on a Unix socket under the simulated driver, the front on
// a port; the same shared scrapes as the single process, through the front. Prints its line.
void MeasureSplit(const fs::path& root, const fs::path& work, int scrapes) {
  const fs::path sock = work / "exporter.sock";
  const pid_t collector =
      Start({NEURON_SIM_BIN, "exec", "--root", root.string(), "--", NEURON_EXPORTER_BIN, "--root",
             root.string(), "--kubelet-dir", (work / "kubelet").string(), "--no-pod-resources",
             "--web.listen-address", "unix:" + sock.string()},
            work / "collector.log");
  WaitFor(
      [&] { return Slurp(work / "collector.log").find("listening on unix:") != std::string::npos; },
      std::chrono::seconds(60));
  const pid_t front = Start({NEURON_EXPORTER_BIN, "--web.listen-address", "127.0.0.1:0",
                             "--front.upstream", "unix:" + sock.string()},
                            work / "front.log");
  const int front_port = PortFromLog(work / "front.log");
  Measure(front, front_port, 10);
  const Figures split = Measure(front, front_port, scrapes, 20, std::chrono::milliseconds(1100));
  const ProcCost front_cost = Cost(front);
  const ProcCost collector_cost = Cost(collector);
  StopPid(front);
  StopPid(collector);
  std::printf(
      "  split, shared scrape through the front: median %.2f ms, p99 %.2f ms (target p99 <= 5 ms); "
      "RSS front %.1f MiB, collector %.1f MiB\n",
      split.median_ms, split.p99_ms, front_cost.rss_kib / 1024.0, collector_cost.rss_kib / 1024.0);
}

// Debian's prometheus-node-exporter on the same machine, and our figures as ratios of its.
void CompareWithNodeExporter(const fs::path& work, int scrapes, const Figures& full,
                             const Figures& shared, const ProcCost& shared_cost) {
  const int ne_port = neuron::testing::FreePort();
  const pid_t ne = Start(
      {"prometheus-node-exporter", "--web.listen-address=127.0.0.1:" + std::to_string(ne_port)},
      work / "node_exporter.log");
  WaitFor([&] { return Scrape(ne_port) > 0; }, std::chrono::seconds(30));
  Measure(ne, ne_port, 10);
  const Figures node = Measure(ne, ne_port, scrapes);
  const ProcCost node_cost = Cost(ne);
  StopPid(ne);
  std::printf("== prometheus-node-exporter (default collectors), same machine\n");
  std::printf("  scrape: median %.2f ms, p99 %.2f ms, %" PRId64
              " bytes, CPU %.2f ms/scrape, RSS %.1f MiB\n",
              node.median_ms, node.p99_ms, node.bytes, node.cpu_ms_per_scrape,
              node_cost.rss_kib / 1024.0);
  std::printf("== ratios neuron-exporter / node_exporter\n");
  std::printf(
      "  full-read scrape p99 %.2fx, shared scrape p99 %.2fx, CPU per full scrape %.2fx, "
      "RSS %.2fx\n",
      full.p99_ms / node.p99_ms, shared.p99_ms / node.p99_ms,
      full.cpu_ms_per_scrape / std::max(1e-9, node.cpu_ms_per_scrape),
      static_cast<double>(shared_cost.rss_kib) / static_cast<double>(node_cost.rss_kib));
}

// `neuron-sim up` and a matmul workload on cores 0-31: the simulator's and the workload's pids,
// or nothing (said on stderr) when the simulator does not get ready.
std::optional<std::pair<pid_t, pid_t>> StartNode(const fs::path& root, const fs::path& work) {
  const pid_t sim =
      Start({NEURON_SIM_BIN, "up", "--instance", "trn2.48xlarge", "--root", root.string()},
            work / "sim.log");
  if (!WaitFor([&] { return fs::exists(root / "run/neuron/sim.ready"); },
               std::chrono::seconds(120))) {
    std::fprintf(stderr, "neuron-sim up did not get ready:\n%s\n", Slurp(work / "sim.log").c_str());
    return std::nullopt;
  }
  const pid_t job = Start({NEURON_SIM_BIN, "run", "--root", root.string(), "--workload", "matmul"},
                          work / "run.log", {"NEURON_RT_VISIBLE_CORES=0-31"});
  // The workload prints its banner after nrt_init, which claims its datastores; its models load
  // during the next seconds.
  WaitFor([&] { return !Slurp(work / "run.log").empty(); }, std::chrono::seconds(60));
  std::this_thread::sleep_for(std::chrono::seconds(2));
  return std::pair{sim, job};
}

// The value of --scrapes N (200 without it); nullopt, after a message naming the flag, when N is
// not a positive integer.
std::optional<int> ScrapesFlag(int argc, char** argv) {
  int scrapes = 200;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string_view(argv[i]) != "--scrapes") continue;
    const std::string_view text = argv[++i];
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), scrapes);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || scrapes <= 0) {
      std::fprintf(stderr, "monitor_bench: --scrapes wants a positive integer, got \"%s\"\n",
                   argv[i]);
      return std::nullopt;
    }
  }
  return scrapes;
}

int Main(int argc, char** argv) {
  const std::optional<int> scrapes_flag = ScrapesFlag(argc, argv);
  if (!scrapes_flag) return 2;
  const int scrapes = *scrapes_flag;
  const char* tmp = std::getenv("TMPDIR");
  const fs::path work =
      fs::path(tmp != nullptr ? tmp : "/tmp") / ("monitor_bench." + std::to_string(getpid()));
  fs::create_directories(work);
  const fs::path root = work / "root";
  std::printf("== exporter on trn2.48xlarge (LNC 2, 64 cores), matmul on cores 0-31, %d scrapes\n",
              scrapes);
  const std::optional<std::pair<pid_t, pid_t>> node = StartNode(root, work);
  if (!node) return 1;
  const auto [sim, job] = *node;

  auto exporter = [&](const std::vector<std::string>& flags, const std::string& name) {
    // Under the simulated driver, as on a real node, the live datastores are read through
    // /dev/neuronN; `neuron-sim exec` execs the exporter in place, so the PID is the exporter's.
    std::vector<std::string> args = {NEURON_SIM_BIN,
                                     "exec",
                                     "--root",
                                     root.string(),
                                     "--",
                                     NEURON_EXPORTER_BIN,
                                     "--root",
                                     root.string(),
                                     "--kubelet-dir",
                                     (work / "kubelet").string(),
                                     "--web.listen-address",
                                     "127.0.0.1:0",
                                     "--no-pod-resources"};
    args.insert(args.end(), flags.begin(), flags.end());
    const pid_t pid = Start(args, work / (name + ".log"));
    return std::pair{pid, PortFromLog(work / (name + ".log"))};
  };

  auto [full_pid, full_port] = exporter({"--share-window-ms", "0", "--full-sweep-ms", "0"}, "full");
  Measure(full_pid, full_port, 10);  // warm-up
  const Figures full = Measure(full_pid, full_port, scrapes);
  const ProcCost full_cost = Cost(full_pid);
  StopPid(full_pid);

  auto [pid, port] = exporter({"--share-window-ms", "0"}, "hot");
  Measure(pid, port, 10);
  const Figures hot = Measure(pid, port, scrapes);
  StopPid(pid);

  auto [shared_pid, shared_port] = exporter({}, "shared");
  Measure(shared_pid, shared_port, 10);
  const Figures shared =
      Measure(shared_pid, shared_port, scrapes, 20, std::chrono::milliseconds(1100));
  const ProcCost shared_cost = Cost(shared_pid);
  StopPid(shared_pid);

  std::printf(
      "  scrape reading everything: median %.2f ms, p99 %.2f ms (target p99 <= 25 ms), "
      "%" PRId64 " bytes, CPU %.2f ms/scrape\n",
      full.median_ms, full.p99_ms, full.bytes, full.cpu_ms_per_scrape);
  std::printf("  hot scrape (no sharing):   median %.2f ms, p99 %.2f ms, CPU %.2f ms/scrape\n",
              hot.median_ms, hot.p99_ms, hot.cpu_ms_per_scrape);
  std::printf(
      "  shared snapshot scrape:    median %.2f ms, p99 %.2f ms (target p99 <= 5 ms), "
      "CPU %.2f ms/scrape\n",
      shared.median_ms, shared.p99_ms, shared.cpu_ms_per_scrape);
  std::printf(
      "  exporter RSS: %.1f MiB after the full-read runs, %.1f MiB after the shared runs "
      "(target <= 24 MiB)\n",
      full_cost.rss_kib / 1024.0, shared_cost.rss_kib / 1024.0);
  MeasureSplit(root, work, scrapes);

  CompareWithNodeExporter(work, scrapes, full, shared, shared_cost);

  StopPid(job);
  StopPid(sim);
  fs::remove_all(work);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return neuron::GuardedMain("monitor_bench", Main, argc, argv); }
