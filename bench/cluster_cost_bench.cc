// cluster_cost_bench: what a simulated cluster costs this machine, per simulated node, while a
// multi-node training job runs on it.
//
// For each node count: `neuron-sim cluster up` (tests/support SimCluster: per node the driver
// daemon and the kubelet emulator), then on every node a neuron-device-plugin and a
// neuron-exporter under that node's driver (`neuron-sim exec --root`, as scripts/demo.sh and
// scripts/demo-cluster.sh start them), each exporter scraped every --scrape-interval seconds;
// then `neuron-sim job run` of a Llama-2-7B recipe (2 nodes: llama2-7b-raytrain, 4 nodes:
// llama2-7b-nemo) shrunk by --scale to micro-steps of about 0.2 s simulated, for --steps steps.
//
// What is measured, per node:
// - daemon, kubelet, plugin, exporter: user+sys CPU seconds from /proc/PID/stat (utime, stime,
//   and cutime, cstime of children they reaped), read just before the job starts and just after
//   it ends: "job" is the difference, "total" includes their start-up; peak RSS is VmHWM of
//   /proc/PID/status at the end.
// - the pods: every process descended from `job run` whose command line or environment names
//   the node's directory (the pod's `job attach` and its `neuron-sim run`), sampled every 100 ms
//   until it exits (utime+stime, VmHWM): a process's last <= 100 ms of CPU may be missed. The
//   job's processes together are also read exactly from wait4()'s rusage of `job run` once it
//   exited (every descendant reaped); the line "job total" shows both, and the difference is what
//   sampling missed (plus the launcher's own CPU, printed apart).
// - CPU per simulated step: the node's CPU during the job (its four agents and its pods) over
//   the steps the job ran.
// Peak RSS per node is the sum of each process's own peak, an upper bound of the node's peak.
//
// Usage: cluster_cost_bench [--nodes 2,4] [--steps 10] [--micro-steps 4] [--scale 0.35]
//                           [--scrape-interval 15]

#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench/stats.h"
#include "core/proc/procinfo.h"
#include "tests/support/http_client.h"
#include "tests/support/sim_cluster.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Options {
  std::vector<int> nodes{2, 4};
  int steps = 10;
  int micro_steps = 4;
  double scale = 0.35;
  int scrape_interval_s = 15;
};

// ---- /proc ----

struct ProcStat {
  pid_t ppid = 0;
  double self_s = 0;      // utime + stime
  double children_s = 0;  // cutime + cstime (children it reaped)
};

// A whole-word number, or nullopt (no exceptions: a process may vanish mid-read).
template <typename T>
std::optional<T> Number(std::string_view s) {
  T v{};
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<ProcStat> ReadStat(pid_t pid) {
  static const neuron::ProcReader proc = neuron::ProcReader::AtDirectory("/proc");
  const absl::StatusOr<neuron::ProcessStat> s = proc.Stat(pid);
  if (!s.ok()) return std::nullopt;
  const auto tick = static_cast<double>(neuron::ProcReader::TicksPerSecond());
  return ProcStat{s->ppid, static_cast<double>(s->utime + s->stime) / tick,
                  static_cast<double>(s->cutime + s->cstime) / tick};
}

// VmHWM in KiB; nullopt when the process is gone.
std::optional<int64_t> PeakRssKib(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/status", pid));
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("VmHWM:")) continue;
    std::istringstream fields(line.substr(6));
    int64_t kib = 0;
    if (fields >> kib) return kib;
  }
  return std::nullopt;
}

// Every live process below `root` (not `root` itself).
std::vector<pid_t> Descendants(pid_t root) {
  std::map<pid_t, std::vector<pid_t>> kids;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator("/proc", ec)) {
    const std::optional<pid_t> pid = Number<pid_t>(e.path().filename().string());
    if (!pid) continue;
    if (const std::optional<ProcStat> s = ReadStat(*pid)) kids[s->ppid].push_back(*pid);
  }
  std::vector<pid_t> out;
  std::vector<pid_t> todo{root};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    for (const pid_t k : kids[p]) {
      out.push_back(k);
      todo.push_back(k);
    }
  }
  return out;
}

// The command line and environment of a process, NULs as spaces.
std::string Identity(pid_t pid) {
  std::string s = neuron::testing::ReadFile(fmt::format("/proc/{}/cmdline", pid)) + " " +
                  neuron::testing::ReadFile(fmt::format("/proc/{}/environ", pid));
  std::replace(s.begin(), s.end(), '\0', ' ');
  return s;
}

// ---- One node count ----

// A long-lived process of a node: its role, pid, and CPU when the job started.
struct Agent {
  std::string role;
  pid_t pid = -1;
  double cpu_at_start = 0;
  double cpu_at_end = 0;
  int64_t peak_kib = 0;
};

// The last sample of one of the job's processes.
struct JobProc {
  int node = -1;  // -1: the launcher (job run's own helpers), not a node's pod
  double cpu_s = 0;
  int64_t peak_kib = 0;
};

struct Run {
  std::vector<std::string> names;          // the nodes' names
  std::vector<std::vector<Agent>> agents;  // per node
  std::map<pid_t, JobProc> job;            // every process of the job's tree seen
  double job_wall_s = 0;
  double job_rusage_s = 0;  // wait4 of `job run`: itself and every descendant
  int job_exit = -1;
  std::vector<double> micro_step_s;  // simulated seconds, from the pods' step lines
  std::vector<double> step_s;
  int scrapes = 0;
};

double Cpu(pid_t pid) {
  const std::optional<ProcStat> s = ReadStat(pid);
  return s ? s->self_s + s->children_s : 0;
}

// Starts a plugin and an exporter on every node under its driver; false with the reason.
bool StartAgents(const neuron::testing::SimCluster& c, const fs::path& logs, Run* run,
                 std::vector<int>* ports, std::string* error) {
  run->agents.resize(c.spec().nodes.size());
  for (size_t i = 0; i < c.spec().nodes.size(); ++i) {
    const neuron::sim::ClusterNode& n = c.spec().nodes[i];
    run->names.push_back(n.name);
    for (const neuron::sim::ClusterChild& k : c.children()) {
      if (k.node == n.name) run->agents[i].push_back({k.role, k.pid});
    }
    const std::vector<std::string> exec{NEURON_SIM_BIN, "exec", "--root", n.root.string(), "--"};
    std::vector<std::string> plugin = exec;
    plugin.insert(plugin.end(), {NEURON_PLUGIN_BIN, "--root", n.root.string(), "--kubelet-dir",
                                 n.kubelet_dir.string(), "--listen", "127.0.0.1:0"});
    std::vector<std::string> exporter = exec;
    exporter.insert(exporter.end(),
                    {NEURON_EXPORTER_BIN, "--root", n.root.string(), "--kubelet-dir",
                     n.kubelet_dir.string(), "--web.listen-address", "127.0.0.1:0"});
    const fs::path plog = logs / (n.name + ".plugin.log");
    const fs::path elog = logs / (n.name + ".exporter.log");
    run->agents[i].push_back({"plugin", neuron::testing::StartProcess(plugin, plog, plog)});
    run->agents[i].push_back({"exporter", neuron::testing::StartProcess(exporter, elog, elog)});
    const auto registered = [&] {
      const neuron::testing::RunResult r =
          c.Sim({"kubelet", "status", "--kubelet-dir", n.kubelet_dir.string()});
      return r.out.find("aws.amazon.com/neuron capacity=16") != std::string::npos;
    };
    int port = 0;
    const auto listening = [&] {
      return (port = neuron::testing::ListeningPort(neuron::testing::ReadFile(elog))) > 0;
    };
    if (!neuron::testing::WaitUntil(registered, 120s) ||
        !neuron::testing::WaitUntil(listening, 120s)) {
      *error =
          fmt::format("{}: the plugin did not register or the exporter did not listen:\n{}{}",
                      n.name, neuron::testing::ReadFile(plog), neuron::testing::ReadFile(elog));
      return false;
    }
    ports->push_back(port);
  }
  return true;
}

// The node whose directory a process names, or -1.
int NodeOf(pid_t pid, const neuron::testing::SimCluster& c) {
  const std::string id = Identity(pid);
  for (size_t i = 0; i < c.spec().nodes.size(); ++i) {
    const std::string dir = (c.dir() / "nodes" / c.spec().nodes[i].name).string() + "/";
    if (id.find(dir) != std::string::npos) return static_cast<int>(i);
  }
  return -1;
}

// Samples the job's processes every 100 ms and scrapes the exporters every interval until
// `job run` exits; then its exit code and rusage.
void WatchJob(pid_t job, const neuron::testing::SimCluster& c, const std::vector<int>& ports,
              const Options& o, Run* run) {
  const Clock::time_point t0 = Clock::now();
  Clock::time_point next_scrape = t0;
  for (;;) {
    for (const pid_t p : Descendants(job)) {
      const std::optional<ProcStat> s = ReadStat(p);
      const std::optional<int64_t> hwm = PeakRssKib(p);
      if (!s || !hwm) continue;
      auto [it, fresh] = run->job.try_emplace(p);
      if (fresh || it->second.node < 0) it->second.node = NodeOf(p, c);
      it->second.cpu_s = std::max(it->second.cpu_s, s->self_s);
      it->second.peak_kib = std::max(it->second.peak_kib, *hwm);
    }
    if (Clock::now() >= next_scrape) {
      for (const int port : ports) {
        run->scrapes += neuron::testing::HttpGet(port, "/metrics").status == 200 ? 1 : 0;
      }
      next_scrape += std::chrono::seconds(o.scrape_interval_s);
    }
    int status = 0;
    rusage ru{};
    if (wait4(job, &status, WNOHANG, &ru) == job) {
      run->job_wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
      run->job_exit = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      run->job_rusage_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                          static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
      return;
    }
    // Sampling is the point here, not waiting for an event: a CPU sample every 100 ms.
    std::this_thread::sleep_for(100ms);
  }
}

// Every number that follows `key` in `text` ("micro-step 0.237 s": key "micro-step ").
void Figures(const std::string& text, std::string_view key, std::vector<double>* out) {
  for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + 1)) {
    const size_t from = at + key.size();
    const size_t to = text.find_first_of(" \n", from);
    const std::string_view all = text;
    const std::string_view word =
        all.substr(from, to == std::string::npos ? std::string::npos : to - from);
    if (const std::optional<double> v = Number<double>(word)) out->push_back(*v);
  }
}

// The pods' step lines' figures, from their logs under DIR/jobs: `neuron-sim run` prints
// "step_time X s" and "micro-step Y s" (driver-sim/README.md#workloads).
void StepFigures(const fs::path& dir, Run* run) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir / "jobs", ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const std::string text = neuron::testing::ReadFile(it->path());
    Figures(text, "micro-step ", &run->micro_step_s);
    Figures(text, "step_time ", &run->step_s);
  }
}

std::string Recipe(int nodes) { return nodes == 2 ? "llama2-7b-raytrain" : "llama2-7b-nemo"; }

std::optional<Run> RunCluster(const Options& o, int nodes, std::string* error) {
  const neuron::testing::TempDir logs("cluster_cost");
  neuron::testing::SimCluster c(
      neuron::testing::SimClusterOptions{.sim_bin = NEURON_SIM_BIN, .nodes = nodes});
  if (!c.Up()) {
    *error = c.Log();
    return std::nullopt;
  }
  Run run;
  std::vector<int> ports;
  const bool agents = StartAgents(c, logs.path(), &run, &ports, error);
  for (std::vector<Agent>& node : run.agents) {
    for (Agent& a : node) a.cpu_at_start = Cpu(a.pid);
  }
  if (agents) {
    const fs::path job_log = logs.path() / "job.log";
    const pid_t job = neuron::testing::StartProcess(
        {NEURON_SIM_BIN, "job", "run", "--cluster", c.dir().string(), "--recipe", Recipe(nodes),
         "--steps", std::to_string(o.steps), "--micro-steps", std::to_string(o.micro_steps),
         "--scale", fmt::format("{}", o.scale)},
        job_log, job_log, {}, error);
    if (job > 0) WatchJob(job, c, ports, o, &run);
    if (run.job_exit != 0) {
      *error += fmt::format("job run exited with {}:\n{}", run.job_exit,
                            neuron::testing::ReadFile(job_log));
    }
    StepFigures(c.dir(), &run);
  }
  for (size_t i = 0; i < run.agents.size(); ++i) {
    for (Agent& a : run.agents[i]) {
      const std::optional<ProcStat> s = ReadStat(a.pid);
      const std::optional<int64_t> kib = PeakRssKib(a.pid);
      if (!s || !kib) {  // its figures are unknown, and the node lost an agent
        *error += fmt::format("{}: the {} (pid {}) is gone\n", run.names[i], a.role, a.pid);
        continue;
      }
      a.cpu_at_end = s->self_s + s->children_s;
      a.peak_kib = *kib;
    }
  }
  for (std::vector<Agent>& node : run.agents) {  // ours only; the cluster stops its own
    for (Agent& a : node) {
      if (a.role == "plugin" || a.role == "exporter") neuron::testing::Stop(a.pid, 60s);
    }
  }
  if (const std::string down = c.Down(); !down.empty()) *error += "cluster down: " + down;
  if (!error->empty()) return std::nullopt;
  return run;
}

// Node i's rows: each agent, its pods, the node, and per step; returns the pods' sampled CPU.
double PrintNode(const Options& o, const Run& run, size_t i, double step_s) {
  const std::string& name = run.names[i];
  double agents = 0;
  int64_t kib = 0;
  for (const Agent& a : run.agents[i]) {
    fmt::print("{:<8} {:<16} {:>12.2f} {:>12.2f} {:>14.1f}\n", name, a.role,
               a.cpu_at_end - a.cpu_at_start, a.cpu_at_end, static_cast<double>(a.peak_kib) / 1024);
    agents += a.cpu_at_end - a.cpu_at_start;
    kib += a.peak_kib;
  }
  double pods = 0;
  int64_t pods_kib = 0;
  int procs = 0;
  for (const auto& [pid, p] : run.job) {
    if (p.node != static_cast<int>(i)) continue;
    pods += p.cpu_s;
    pods_kib += p.peak_kib;
    ++procs;
  }
  fmt::print("{:<8} {:<16} {:>12.2f} {:>12.2f} {:>14.1f}\n", name,
             fmt::format("pods ({} procs)", procs), pods, pods,
             static_cast<double>(pods_kib) / 1024);
  const double node = agents + pods;
  fmt::print("{:<8} {:<16} {:>12.2f} {:>12} {:>14.1f}\n", name, "node", node, "",
             static_cast<double>(kib + pods_kib) / 1024);
  // Without step lines the simulated time is unknown, not zero.
  const std::string per_sim_s =
      step_s > 0 ? fmt::format("{:.3f}", node / (o.steps * step_s)) : std::string("absent");
  fmt::print(
      "{:<8} per step: {:.3f} CPU s (pods {:.3f}, agents {:.3f}); {} CPU s per simulated s\n", name,
      node / o.steps, pods / o.steps, agents / o.steps, per_sim_s);
  return pods;
}

void PrintRun(const Options& o, int nodes, const Run& run) {
  const double step_s = run.step_s.empty() ? 0 : neuron::bench::Median(run.step_s);
  fmt::print("# {} x trn1.32xlarge, job {}: {} steps of {} micro-steps, scale {}\n", nodes,
             Recipe(nodes), o.steps, o.micro_steps, o.scale);
  fmt::print(
      "# simulated step {:.3f} s, micro-step {:.3f} s (medians of {} step lines); job wall time "
      "{:.1f} s; {} scrapes\n",
      step_s, neuron::bench::Median(run.micro_step_s), run.step_s.size(), run.job_wall_s,
      run.scrapes);
  fmt::print("{:<8} {:<16} {:>12} {:>12} {:>14}\n", "node", "process", "CPU job (s)",
             "CPU total (s)", "peak RSS (MiB)");
  double sampled = 0;
  for (size_t i = 0; i < run.agents.size(); ++i) sampled += PrintNode(o, run, i, step_s);
  double launcher = 0;
  for (const auto& [pid, p] : run.job) launcher += p.node < 0 ? p.cpu_s : 0;
  fmt::print(
      "job total: {:.2f} CPU s by wait4 rusage of `job run` and its descendants; sampled pods "
      "{:.2f} + launcher processes {:.2f} (the rest is what 100 ms sampling missed and job run "
      "itself)\n\n",
      run.job_rusage_s, sampled, launcher);
}

std::string ParseFlags(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; i += 2) {
    const std::string_view flag = argv[i];
    if (i + 1 >= argc) return fmt::format("{} needs a value", flag);
    const std::string value = argv[i + 1];
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (flag == "--nodes") {
      o->nodes.clear();
      std::stringstream in(value);
      for (std::string part; std::getline(in, part, ',');) {
        if (part != "2" && part != "4") return "--nodes: 2 and/or 4 (the recipes' node counts)";
        o->nodes.push_back(part == "2" ? 2 : 4);
      }
      continue;
    }
    if (end == value.c_str() || *end != '\0' || v <= 0) {
      return fmt::format("{}: expected a positive number, got \"{}\"", flag, value);
    }
    if (flag == "--steps") {
      o->steps = static_cast<int>(v);
    } else if (flag == "--micro-steps") {
      o->micro_steps = static_cast<int>(v);
    } else if (flag == "--scale") {
      o->scale = v;
    } else if (flag == "--scrape-interval") {
      o->scrape_interval_s = std::max(1, static_cast<int>(v));
    } else {
      return fmt::format("unknown flag {}", flag);
    }
  }
  return o->steps >= 1 && o->micro_steps >= 1 ? "" : "--steps and --micro-steps: at least 1";
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const std::string e = ParseFlags(argc, argv, &o); !e.empty()) {
    fmt::print(stderr, "cluster_cost_bench: {}\n", e);
    return 2;
  }
  fmt::print(
      "host cost of a simulated cluster per node: driver daemon, kubelet emulator, device plugin "
      "and exporter (scraped every {} s), and the job's pods; machine: {} CPUs\n",
      o.scrape_interval_s, sysconf(_SC_NPROCESSORS_ONLN));
  for (const int nodes : o.nodes) {
    std::string error;
    const std::optional<Run> run = RunCluster(o, nodes, &error);
    if (!run) {
      fmt::print(stderr, "cluster_cost_bench: {} nodes: {}\n", nodes, error);
      return 1;
    }
    PrintRun(o, nodes, *run);
    std::fflush(stdout);
  }
  return 0;
}
