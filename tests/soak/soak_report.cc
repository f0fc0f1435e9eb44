#include "tests/soak/soak_report.h"

#include <fstream>

#include "tests/soak/soak_record.h"
#include "tests/support/subprocess.h"

namespace neuron::soak {
namespace {

// The simulator's reset duration (`neuron-sim up --reset-ms`, default 300; the soak's node keeps
// the default): how long a reset keeps a device out of READY.
constexpr double kResetSeconds = 0.3;

}  // namespace

void ReportFaults(Report& report, const Stats& stats, double soak_s) {
  int damage = 0, repair = 0, refused = 0;
  std::string damage_kinds, repair_kinds, refused_kinds;
  for (const auto& [k, v] : stats.faults_ok) {
    (IsDamage(k) ? damage : repair) += v;
    (IsDamage(k) ? damage_kinds : repair_kinds) += fmt::format(" {}={}", k, v);
  }
  for (const auto& [k, v] : stats.faults_refused) {
    refused += v;
    refused_kinds += fmt::format(" {}={}", k, v);
  }
  report.Line(
      fmt::format("damage injected {} ({:.1f}/s):{}", damage, damage / soak_s, damage_kinds));
  report.Line(fmt::format("repairs {} ({:.1f}/s):{}", repair, repair / soak_s, repair_kinds));
  report.Line(fmt::format("refused by the daemon {}:{}", refused, refused_kinds));
}

Workloads JudgeWorkloads(const Stats& stats, const SoakNode& node, const Load& load) {
  Workloads out;
  const double now_s = load.Now();
  std::ofstream faults_log(node.logs() / "faults.log");
  for (const FaultEvent& e : stats.events) faults_log << Describe(e) << "\n";
  std::ofstream summary(node.logs() / "workloads.log");
  for (const WorkloadRecord& w : stats.workloads) {
    const std::string log = neuron::testing::ReadFile(w.log);
    const Verdict v = Classify(w, stats.events, node.cores_per_device(), kResetSeconds, now_s, log);
    (w.quiet ? out.quiet : out.others) += 1;
    if (v.kind == Verdict::Kind::kOk) (w.quiet ? out.quiet_ok : out.others_ok) += 1;
    if (v.kind == Verdict::Kind::kExpected) ++out.expected[v.cause];
    summary << Describe(w) << ": "
            << (v.kind == Verdict::Kind::kOk         ? "ok"
                : v.kind == Verdict::Kind::kExpected ? "expected failure: " + v.why
                                                     : "VIOLATION: " + v.why)
            << "\n";
    if (v.kind != Verdict::Kind::kViolation) continue;
    std::string tail;
    const std::string last = LastLines(log, 20);
    for (size_t pos = 0; pos < last.size();) {
      const size_t nl = std::min(last.find('\n', pos), last.size());
      tail += "\n         | " + last.substr(pos, nl - pos);
      pos = nl + 1;
    }
    out.violations.push_back(fmt::format("{}\n         {}{}", Describe(w), v.why, tail));
    summary << tail << "\n";
  }
  return out;
}

void ReportWorkloads(Report& report, const Stats& stats, const Workloads& w) {
  std::string exits, causes;
  for (const auto& [k, v] : stats.workload_exits) exits += fmt::format(" exit{}={}", k, v);
  for (const auto& [k, v] : w.expected) causes += fmt::format(" [{}]={}", k, v);
  report.Line(fmt::format(
      "workloads (neuron-sim run matmul) started {} ({} quiet, {} elsewhere):{}; failures "
      "explained by a fault on their devices:{}; quiet pods the kubelet could not place {}; not "
      "started because the pod's cores were not one contiguous range (nrt_init refuses those) {}",
      stats.workloads_started, w.quiet, w.others, exits, causes.empty() ? " none" : causes,
      stats.quiet_rejected, stats.not_started_noncontiguous));
}

void CheckAllocation(Report& report, const Stats& stats, const Minimums& min) {
  std::string examples;
  for (const std::string& e : stats.double_booked_examples) examples += "\n       " + e;
  report.Check("no core held by two pods",
               stats.double_booked == 0 && stats.admitted >= min.admissions,
               fmt::format("{} admissions checked (needs >= {}), {} with a doubly held core{}",
                           stats.admitted, min.admissions, stats.double_booked, examples));
  examples.clear();
  for (const std::string& e : stats.contiguous_examples) examples += "\n       " + e;
  const int possible = stats.contiguous_possible;
  report.Check(
      "contiguous+connected when possible",
      stats.contiguous_missed == 0 && possible >= min.contiguous,
      fmt::format("{} admissions had one free (needs >= {}): {} missed ({:.2f}%), {} more missed "
                  "while the kubelet's view changed mid-admission ({:.2f}%){}",
                  possible, min.contiguous, stats.contiguous_missed,
                  possible ? 100.0 * stats.contiguous_missed / possible : 0.0,
                  stats.contiguous_missed_racy,
                  possible ? 100.0 * stats.contiguous_missed_racy / possible : 0.0, examples));
}

void CheckRestarts(Report& report, const Stats& stats, const Minimums& min) {
  std::string failures;
  for (const std::string& f : stats.restart_failures) failures += "\n       " + f;
  report.Check("kubelet restarts re-registered",
               stats.restart_failures.empty() && stats.reregister_late == 0 &&
                   stats.kubelet_restarts >= min.restarts,
               fmt::format("{} restarts (needs >= {}), {} failed, {} not back within 20 s{}",
                           stats.kubelet_restarts, min.restarts, stats.restart_failures.size(),
                           stats.reregister_late, failures));
}

void CheckWorkloads(Report& report, const Stats& stats, const Workloads& w, const Minimums& min) {
  report.Check("quiet workloads all exit 0", w.quiet_ok == w.quiet && w.quiet >= min.quiet,
               fmt::format("{} of {} exited 0 (needs >= {} quiet workloads)", w.quiet_ok, w.quiet,
                           min.quiet));
  std::string shown;
  for (size_t i = 0; i < w.violations.size() && i < 5; ++i) shown += "\n       " + w.violations[i];
  int expected = 0;
  for (const auto& [k, v] : w.expected) expected += v;
  report.Check(
      "workload failures explained", w.violations.empty() && w.others >= min.workloads,
      fmt::format("{} workloads off the quiet devices (needs >= {}): {} exit 0, {} failures "
                  "explained, {} not (all in workloads.log){}",
                  w.others, min.workloads, w.others_ok, expected, w.violations.size(), shown));
  std::string errors;
  for (const std::string& e : stats.workload_errors) errors += "\n       " + e;
  for (const std::string& e : stats.kubelet_stop_errors) errors += "\n       " + e;
  report.Check("kubelet stops workload groups",
               stats.workload_errors.empty() && stats.kubelet_stop_errors.empty() &&
                   stats.kubelet_stops >= min.kubelet_stops,
               fmt::format("{} pods deleted while their workload ran (needs >= {}), {} spawn or "
                           "SetPodProcessGroup errors, {} DeletePod errors{}",
                           stats.kubelet_stops, min.kubelet_stops, stats.workload_errors.size(),
                           stats.kubelet_stop_errors.size(), errors));
}

}  // namespace neuron::soak
