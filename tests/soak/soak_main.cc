// `soak`: a simulated trn1.32xlarge under random faults every 100 ms for SOAK_SECONDS (default 600)
// while pods come and go through the kubelet emulator, the kubelet restarts every 20-30 s and
// Prometheus scrapes the exporter and the plugin beside slow and idle clients (soak_abuse.h); then
// the invariants of docs/RELIABILITY.md#soak,
// each printed PASS/FAIL with its numbers and FAIL below its minimum evidence (Minimums). Exit 0
// only when every invariant holds.
//
// Under --logs: faults.log (every fault request: time, kind, target, outcome), workloads.log (every
// workload: pod, cores, devices, life, exit status, verdict, and a violation's log tail) and
// workloads/<n>-<pod>.log (each workload's own output), beside the children's logs.
//
//   soak [--seconds N] [--seed N] [--logs DIR] [--report FILE] [--scrape-interval S]
//        [--rss-limit-kib N]
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <string_view>
#include <thread>
#include <tuple>

#include "driver-sim/driver/ctl.h"
#include "tests/soak/soak_abuse.h"
#include "tests/soak/soak_checks.h"
#include "tests/soak/soak_load.h"
#include "tests/soak/soak_node.h"
#include "tests/soak/soak_record.h"
#include "tests/soak/soak_report.h"
#include "tests/support/http_client.h"
#include "tests/support/subprocess.h"

namespace neuron::soak {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using neuron::testing::WaitUntil;

struct Args {
  int seconds = 600;
  uint64_t seed = 1;
  std::string logs;
  std::string report;
  int scrape_interval_s = 1;
  int64_t rss_limit_kib = 2048;
};

int Usage() {
  std::cerr << "usage: soak [--seconds N] [--seed N] [--logs DIR] [--report FILE] "
               "[--scrape-interval S] [--rss-limit-kib N]\n";
  return 2;
}

bool CtlOk(const SoakNode& node, const std::vector<std::string>& words) {
  absl::StatusOr<sim::CtlRequest> r = sim::ParseCtlArgs(words);
  if (!r.ok()) return false;
  absl::StatusOr<sim::CtlReply> reply = sim::SendCtlRequest(node.paths(), *r, 5000ms);
  return reply.ok() && reply->outcome == sim::CtlOutcome::kOk;
}

// Polls until the kubelet's view equals the ground truth or the ceiling passes; the last
// comparison and the seconds it took.
std::pair<HealthComparison, double> Converge(SoakNode& node, const Baseline& baseline,
                                             std::chrono::seconds ceiling) {
  const auto t0 = Clock::now();
  HealthComparison last;
  WaitUntil(
      [&] {
        const HwTruth truth = GroundTruth(node.paths(), node.devices(), node.efa_names(), baseline);
        last = CompareHealth(truth, node.kubelet(), node.cores_per_device());
        return last.mismatches.empty();
      },
      ceiling);
  return {last, std::chrono::duration<double>(Clock::now() - t0).count()};
}

std::string Mismatches(const HealthComparison& c) {
  std::string s;
  for (size_t i = 0; i < c.mismatches.size() && i < 6; ++i) s += "\n       " + c.mismatches[i];
  return s;
}

// A quiet point, the same at warm-up and at the end so that fds, threads and RSS compare like
// with like: workloads stopped, at most 4 pods left, every device plugged, every EFA up, every
// device reset to READY, and the kubelet's view converged on that. Returns the baseline of the
// health evidence, whether it converged, and the comparison.
struct Quiet {
  bool ready = false;
  bool exporter_whole = false;  // the exporter listed every device and EFA before the measure
  Baseline baseline;
  HealthComparison health;
  double converge_s = 0;
  ProcessUsage plugin, exporter;
};
// The exporter's full counter sweep (its --full-sweep-ms default, monitor/main.cc), the one pass
// that reads every directory it keeps a handle on.
constexpr auto kExporterFullSweep = 10s;

// Whether the exporter's /metrics lists every device and every EFA: it re-reads its inventory
// every 30 s, so just after the quiet point's plugs it may still miss some, and it would then hold
// fewer directory handles than at a quiet point where it has them all.
bool ExporterSeesWholeNode(const SoakNode& node) {
  const neuron::testing::HttpResult m = neuron::testing::HttpGet(node.exporter_port(), "/metrics");
  if (m.status != 200) return false;
  int devices = 0, efas = 0;
  for (size_t pos = 0; pos < m.body.size();) {
    const size_t nl = std::min(m.body.find('\n', pos), m.body.size());
    const std::string_view line(m.body.data() + pos, nl - pos);
    if (line.starts_with("neuron_device_info{")) ++devices;
    if (line.starts_with("neuron_efa_info{")) ++efas;
    pos = nl + 1;
  }
  return devices == node.devices() && efas == static_cast<int>(node.efa_names().size());
}

Quiet Quiesce(SoakNode& node, Load& load) {
  Quiet q;
  load.Drain(4);
  // Through the load's Ctl: the workload verdicts need every reset and plug on the timeline.
  for (int d = 0; d < node.devices(); ++d) {
    if (!std::filesystem::exists(node.paths().NeuronDevice(d))) {
      load.Ctl({"plug", "--device", std::to_string(d)}, "plug", false);
    }
  }
  for (const std::string& e : node.efa_names()) {
    if (!std::filesystem::exists(node.paths().InfinibandClassDir() / e)) {
      load.Ctl({"efa-up", "--efa", e}, "efa-up", false);
    }
  }
  for (int d = 0; d < node.devices(); ++d) {
    WaitUntil(
        [&] {
          return load.Ctl({"reset", "--device", std::to_string(d)}, "reset", false);
        },
        10s);
  }
  q.ready = WaitUntil(
      [&] {
        for (int d = 0; d < node.devices(); ++d) {
          if (neuron::testing::ReadFile(node.paths().NeuronDevice(d) / "reset") != "1\n") {
            return false;
          }
        }
        return true;
      },
      15s);
  std::this_thread::sleep_for(1s);  // runtime kmsg records of drained workloads land first
  q.baseline = TakeBaseline(node.paths(), node.devices());
  std::tie(q.health, q.converge_s) = Converge(node, q.baseline, 30s);
  std::this_thread::sleep_for(3s);  // the plugin's allocation grace (2 s) passes
  q.exporter_whole = WaitUntil([&] { return ExporterSeesWholeNode(node); }, 45s);
  std::this_thread::sleep_for(kExporterFullSweep + 1s);  // then a full sweep reads it all
  q.plugin = QuietUsage(node.plugin_pid(), 5, 200ms);
  q.exporter = QuietUsage(node.exporter_pid(), 5, 200ms);
  return q;
}

void LogProgress(Stats& stats, Clock::time_point start, spdlog::logger& log) {
  std::lock_guard<std::mutex> lock(stats.mu);
  int damage = 0, repair = 0;
  for (const auto& [k, v] : stats.faults_ok) (IsDamage(k) ? damage : repair) += v;
  log.info(
      "t={}s damage={} repairs={} admitted={} rejected={} workloads={} restarts={} "
      "double_booked={}",
      std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start).count(), damage,
      repair, stats.admitted, stats.rejected, stats.workloads_started, stats.kubelet_restarts,
      stats.double_booked);
}

// The load, watched: faults, pods and kubelet restarts from three threads until the run's end,
// with the warm-up quiet point at 10% of it (its pause does not count as soak time).
struct LoadRun {
  std::vector<std::string> crashed;
  std::optional<Quiet> warm;
  double paused_s = 0;
  double soak_s = 0;
};
LoadRun DriveLoad(SoakNode& node, Load& load, AbuseLoad& abuse, Stats& stats, const Args& args,
                  Clock::time_point start, spdlog::logger& log) {
  LoadRun run;
  std::atomic<bool> stop{false};
  std::vector<std::thread> drivers;
  auto start_load = [&] {
    stop = false;
    drivers.emplace_back([&] { load.RunFaults(stop, 100ms); });
    drivers.emplace_back([&] { load.RunPods(stop); });
    drivers.emplace_back([&] { load.RunRestarts(stop); });
    abuse.Start();
  };
  auto stop_load = [&] {
    stop = true;
    abuse.Stop();
    for (std::thread& t : drivers) t.join();
    drivers.clear();
  };
  start_load();
  const auto warm_at = start + std::chrono::seconds(std::max(5, args.seconds / 10));
  auto end_at = start + std::chrono::seconds(args.seconds);
  auto next_progress = start + 30s;
  while (Clock::now() < end_at && run.crashed.empty()) {
    std::this_thread::sleep_for(500ms);
    for (const std::string& name : node.Poll()) run.crashed.push_back(name);
    if (!run.warm && Clock::now() >= warm_at) {
      const auto t0 = Clock::now();
      stop_load();
      run.warm = Quiesce(node, load);
      start_load();
      const auto pause = Clock::now() - t0;  // not soak time: the end moves by as much
      end_at += std::chrono::duration_cast<Clock::duration>(pause);
      run.paused_s = std::chrono::duration<double>(pause).count();
    }
    if (Clock::now() >= next_progress) {
      next_progress += 30s;
      LogProgress(stats, start, log);
    }
  }
  stop_load();
  run.soak_s = std::chrono::duration<double>(Clock::now() - start).count() - run.paused_s;
  for (const std::string& name : node.Poll()) run.crashed.push_back(name);
  return run;
}

// The final scene: two devices unplugged, one failed reset, one HBM and one SRAM UE, two EFAs
// down, on distinct devices; the kubelet must see exactly that, the mask aside.
struct Scene {
  bool played = false;
  HealthComparison cmp;
  double converge_s = 0;
};
Scene PlayFinalScene(SoakNode& node, const Args& args, const Baseline& baseline) {
  std::vector<int> order(node.devices());
  for (int d = 0; d < node.devices(); ++d) order[d] = d;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(args.seed));
  auto dev = [&](int i) { return std::to_string(order[i]); };
  Scene s;
  s.played = CtlOk(node, {"unplug", "--device", dev(0)}) &&
             CtlOk(node, {"unplug", "--device", dev(1)}) &&
             CtlOk(node, {"reset", "--device", dev(2), "--fail"}) &&
             CtlOk(node, {"inject", "hbm-ue", "--device", dev(3)}) &&
             CtlOk(node, {"inject", "sram-ue", "--device", dev(4)}) &&
             CtlOk(node, {"efa-down", "--efa", node.efa_names()[1]}) &&
             CtlOk(node, {"efa-down", "--efa", node.efa_names()[6]});
  s.played = s.played && WaitUntil(
                             [&] {
                               return neuron::testing::ReadFile(
                                          node.paths().NeuronDevice(order[2]) / "reset") == "2\n";
                             },
                             10s);
  std::tie(s.cmp, s.converge_s) = Converge(node, baseline, 30s);
  return s;
}

// What the children answer at the end, and Prometheus's record of its scrapes of each.
struct EndState {
  bool plugin_answers = false, exporter_answers = false, sim_answers = false;
  int exp_scrapes = 0, exp_failed = 0, plug_scrapes = 0, plug_failed = 0;
  double wall_s = 0;
};
EndState ReadEndState(SoakNode& node, Clock::time_point start) {
  EndState e;
  e.plugin_answers = neuron::testing::HttpGet(node.plugin_port(), "/healthz").status == 200;
  const neuron::testing::HttpResult m = neuron::testing::HttpGet(node.exporter_port(), "/metrics");
  e.exporter_answers = m.status == 200 && m.body.find("neuron_up") != std::string::npos;
  e.sim_answers = CtlOk(node, {"status"});
  const int window =
      static_cast<int>(std::ceil(std::chrono::duration<double>(Clock::now() - start).count())) + 30;
  auto scrapes = [&](const std::string& job) {
    const std::string sel = "up{job=\"" + job + "\"}[" + std::to_string(window) + "s]";
    const double n = node.PromScalar("count_over_time(" + sel + ")").value_or(0);
    const double ok = node.PromScalar("sum_over_time(" + sel + ")").value_or(0);
    return std::pair<int, int>(static_cast<int>(n), static_cast<int>(n - ok));
  };
  std::tie(e.exp_scrapes, e.exp_failed) = scrapes("exporter");
  std::tie(e.plug_scrapes, e.plug_failed) = scrapes("plugin");
  e.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  return e;
}

void ReportSummary(Report& report, const Args& args, const Stats& stats, const LoadRun& run,
                   const EndState& e, const Quiet& end, const Workloads& workloads) {
  report.Line("==== soak summary ====");
  report.Line(
      fmt::format("instance trn1.32xlarge, seed {}, soak {:.0f} s under load (asked {} s), "
                  "warm-up pause {:.0f} s, wall {:.0f} s",
                  args.seed, run.soak_s, args.seconds, run.paused_s, e.wall_s));
  ReportFaults(report, stats, run.soak_s);
  std::string reasons;
  for (const auto& [k, v] : stats.rejected_by_reason) reasons += fmt::format(" [{}]={}", k, v);
  report.Line(fmt::format("pods admitted {} rejected {} deleted {}; rejections:{}", stats.admitted,
                          stats.rejected, stats.deleted, reasons));
  ReportWorkloads(report, stats, workloads);
  report.Line(fmt::format(
      "kubelet restarts {}, re-registered in mean {:.2f} s, max {:.2f} s", stats.kubelet_restarts,
      stats.kubelet_restarts ? stats.reregister_sum_s / stats.kubelet_restarts : 0.0,
      stats.reregister_max_s));
  report.Line(fmt::format("prometheus scrapes: exporter {} ({} failed), plugin {} ({} failed)",
                          e.exp_scrapes, e.exp_failed, e.plug_scrapes, e.plug_failed));
  const Quiet none;
  const Quiet& warm = run.warm ? *run.warm : none;
  for (const auto& [who, w, x] : {std::tuple{"plugin  ", &warm.plugin, &end.plugin},
                                  std::tuple{"exporter", &warm.exporter, &end.exporter}}) {
    report.Line(fmt::format("{} fds {} -> {}, threads {} -> {}, RSS {} -> {} KiB", who, w->fds,
                            x->fds, w->threads, x->threads, w->rss_kib, x->rss_kib));
  }
}

// Our threads must not grow at all. gRPC's pools (event_engine, timer_manager, ...) grow when all
// their threads are busy at a peak and keep them (seen: 2 -> 4 event_engine threads in the
// plugin), so they are held to a bound instead: a leak would grow them with every restart or RPC,
// far past it. Both measurements are taken at a quiet point where the process has read the whole
// node (Quiesce), so the exporter's per-directory handles compare like with like.
void CheckLeak(Report& report, const Args& args, const std::string& who, const ProcessUsage& w,
               const ProcessUsage& e, bool like_with_like) {
  const int pool_bound = 8 + 4 * static_cast<int>(std::thread::hardware_concurrency());
  const bool measured = w.fds > 0 && e.fds > 0 && like_with_like;
  const int ours_w = w.threads - w.library_threads, ours_e = e.threads - e.library_threads;
  report.Check(
      "no leak: " + who,
      measured && e.fds <= w.fds && ours_e <= ours_w && e.library_threads <= pool_bound &&
          e.rss_kib - w.rss_kib <= args.rss_limit_kib,
      fmt::format(
          "fds {:+d}, own threads {:+d} (gRPC pool threads {} -> {}, bound {}), RSS {:+d} "
          "KiB (limit {} KiB){}",
          e.fds - w.fds, ours_e - ours_w, w.library_threads, e.library_threads, pool_bound,
          e.rss_kib - w.rss_kib, args.rss_limit_kib,
          like_with_like ? "" : "; the exporter had not read the whole node at a quiet point"));
}

void CheckRun(Report& report, const Args& args, const Stats& stats, const LoadRun& run,
              const EndState& e, const Quiet& end, const Scene& scene, SoakNode& node) {
  std::string exits_text;
  bool exits_ok = true;
  for (const Child& ch : node.children()) {
    exits_text += fmt::format(" {}={}", ch.name, ch.exit_code.value_or(-99));
    if (ch.name != "prometheus") exits_ok = exits_ok && ch.exit_code == 0 && ch.stopped_by_us;
  }
  report.Check("no crash (alive through the run)",
               run.crashed.empty() && stats.ctl_transport_errors == 0,
               fmt::format("ended early: {}; ctl unanswered {}", run.crashed.size(),
                           stats.ctl_transport_errors));
  report.Check("answering at the end", e.plugin_answers && e.exporter_answers && e.sim_answers,
               fmt::format("plugin /healthz {}, exporter /metrics {}, sim ctl status {}",
                           e.plugin_answers, e.exporter_answers, e.sim_answers));
  report.Check("exit 0 at SIGTERM", exits_ok, exits_text);
  const Quiet none;
  const Quiet& warm = run.warm ? *run.warm : none;
  CheckLeak(report, args, "plugin", warm.plugin, end.plugin, true);
  CheckLeak(report, args, "exporter", warm.exporter, end.exporter,
            warm.exporter_whole && end.exporter_whole);
  const HealthComparison& recovered = end.health;
  report.Check("recovered: all healthy after resets",
               run.warm && warm.ready && warm.health.mismatches.empty() && end.ready &&
                   recovered.mismatches.empty() && recovered.unhealthy == 0,
               fmt::format("warm-up: {} mismatches in {:.1f} s; end: {} ids ({} masked), {} "
                           "mismatches, converged in {:.1f} s{}",
                           run.warm ? warm.health.mismatches.size() : 999, warm.converge_s,
                           recovered.ids, recovered.masked, recovered.mismatches.size(),
                           end.converge_s, Mismatches(recovered)));
  report.Check("health == simulator truth (final)",
               scene.played && scene.cmp.mismatches.empty() && scene.cmp.unhealthy == 7,
               fmt::format("{} ids ({} masked), {} hw-unhealthy (want 7), {} mismatches, "
                           "converged in {:.1f} s{}",
                           scene.cmp.ids, scene.cmp.masked, scene.cmp.unhealthy,
                           scene.cmp.mismatches.size(), scene.converge_s, Mismatches(scene.cmp)));
}

void CheckScrapes(Report& report, const Args& args, const EndState& e, const Minimums& min) {
  const int expected = static_cast<int>(e.wall_s / args.scrape_interval_s);
  const int min_scrapes = std::max(min.scrapes, expected * 8 / 10);
  report.Check(
      "prometheus scrapes succeeded",
      e.exp_failed == 0 && e.plug_failed == 0 && e.exp_scrapes >= min_scrapes &&
          e.plug_scrapes >= min_scrapes,
      fmt::format("exporter {} / plugin {} scrapes (each needs >= {}: 80% of ~{} expected), "
                  "failed {} / {}",
                  e.exp_scrapes, e.plug_scrapes, min_scrapes, expected, e.exp_failed,
                  e.plug_failed));
}

int Run(const Args& args) {
  auto log = spdlog::default_logger()->clone("soak");
  // The emulator logs every registration and stream at info; the soak's own progress is enough.
  spdlog::set_level(spdlog::level::warn);
  log->set_level(spdlog::level::info);
  SoakNode node(
      {.logs = args.logs, .seed = args.seed, .scrape_interval_s = args.scrape_interval_s});
  if (absl::Status s = node.Start(); !s.ok()) {
    log->error("start: {}", s.ToString());
    return 1;
  }
  log->info("node up: plugin :{}, exporter :{}, prometheus :{}; soaking {} s", node.plugin_port(),
            node.exporter_port(), node.prometheus_port(), args.seconds);
  const auto start = Clock::now();
  Stats stats;
  Load load(node, stats, args.seed, start);
  AbuseLoad abuse(node.exporter_port(), node.plugin_port());
  LoadRun run = DriveLoad(node, load, abuse, stats, args, start, *log);
  // Recovery: the end's quiet point; the kubelet must see every device and EFA healthy.
  const Quiet end = Quiesce(node, load);
  const Scene scene = PlayFinalScene(node, args, end.baseline);
  const EndState e = ReadEndState(node, start);
  for (const std::string& name : node.Poll()) run.crashed.push_back(name);
  node.Stop();

  Report report;
  std::lock_guard<std::mutex> lock(stats.mu);
  const Workloads workloads = JudgeWorkloads(stats, node, load);
  ReportSummary(report, args, stats, run, e, end, workloads);
  abuse.Summarize(report);
  report.Line("---- invariants ----");
  CheckRun(report, args, stats, run, e, end, scene, node);
  const Minimums min = Minimums::For(args.seconds);
  CheckAllocation(report, stats, min);
  CheckScrapes(report, args, e, min);
  abuse.Check(report, 10);  // the servers' default request deadline (http/http_server.h)
  CheckRestarts(report, stats, min);
  CheckWorkloads(report, stats, workloads, min);
  report.Line(report.all_pass() ? "RESULT: PASS" : "RESULT: FAIL");

  std::cout << report.text() << std::flush;
  if (!args.report.empty()) std::ofstream(args.report) << report.text();
  if (!report.all_pass()) {
    std::cerr << "logs: " << node.logs() << "\n--- plugin.err tail ---\n"
              << node.Tail("plugin.err", 2000) << "\n--- exporter.err tail ---\n"
              << node.Tail("exporter.err", 2000) << "\n";
  }
  return report.all_pass() ? 0 : 1;
}

// A whole decimal number in T's range, or nothing.
template <typename T>
std::optional<T> Number(std::string_view text) {
  T v{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// The flags and SOAK_SECONDS; nothing when one is unknown, lacks its value or is not a number.
std::optional<Args> ParseArgs(int argc, char** argv) {
  Args args;
  if (const char* env = std::getenv("SOAK_SECONDS"); env != nullptr && *env != '\0') {
    const std::optional<int> s = Number<int>(env);
    if (!s) return std::nullopt;
    args.seconds = *s;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--logs") {
      args.logs = value;
    } else if (flag == "--report") {
      args.report = value;
    } else if (flag == "--seed") {
      const std::optional<uint64_t> seed = Number<uint64_t>(value);
      if (!seed) return std::nullopt;
      args.seed = *seed;
    } else if (flag == "--seconds" || flag == "--scrape-interval" || flag == "--rss-limit-kib") {
      const std::optional<int> n = Number<int>(value);
      if (!n || *n < 0) return std::nullopt;
      if (flag == "--seconds") {
        args.seconds = *n;
      } else if (flag == "--scrape-interval") {
        args.scrape_interval_s = std::max(1, *n);
      } else {
        args.rss_limit_kib = *n;
      }
    } else {
      return std::nullopt;
    }
  }
  if (argc % 2 == 0 || args.seconds < 10) return std::nullopt;
  return args;
}

}  // namespace
}  // namespace neuron::soak

int main(int argc, char** argv) {
  const std::optional<neuron::soak::Args> args = neuron::soak::ParseArgs(argc, argv);
  return args ? neuron::soak::Run(*args) : neuron::soak::Usage();
}
