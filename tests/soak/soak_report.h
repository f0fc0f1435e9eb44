#pragma once
// The soak's report: the summary lines and the PASS/FAIL invariants it prints and writes to
// --report (docs/RELIABILITY.md#soak), the least evidence each invariant needs, and the verdict on
// every workload. The checks here read only the load's Stats; those that need the end state stay
// in soak_main.cc.

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "tests/soak/soak_load.h"
#include "tests/soak/soak_node.h"

namespace neuron::soak {

// The summary and the invariants, printed and written to --report.
class Report {
 public:
  void Line(const std::string& s) { text_ += s + "\n"; }
  void Check(const std::string& name, bool pass, const std::string& numbers) {
    Line(fmt::format("{} {:<34} {}", pass ? "PASS" : "FAIL", name, numbers));
    all_pass_ = all_pass_ && pass;
  }
  bool all_pass() const { return all_pass_; }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  bool all_pass_ = true;
};

// The least evidence each invariant needs before it may pass, scaled with --seconds so that a
// short soak still checks something (the 10-minute figures in brackets): admissions 1 per second
// (600), admissions where a contiguous set was possible 1 per 2 s (300), kubelet restarts one
// per 30 s less one for the warm-up pause (19), scrapes of each endpoint 1 per 4 s (150; and 80% of
// those the interval asks for), quiet workloads and other workloads 1 per 12 s each (50),
// workloads the kubelet stopped by deleting their pod 1 per 20 s (30). Never below 1.
struct Minimums {
  int admissions, contiguous, restarts, scrapes, quiet, workloads, kubelet_stops;
  static Minimums For(int seconds) {
    auto at_least_one = [](int v) { return std::max(1, v); };
    return {at_least_one(seconds),     at_least_one(seconds / 2),  at_least_one(seconds / 30 - 1),
            at_least_one(seconds / 4), at_least_one(seconds / 12), at_least_one(seconds / 12),
            at_least_one(seconds / 20)};
  }
};

// Faults as damage and repairs, each by kind (docs/RELIABILITY.md#soak).
void ReportFaults(Report& report, const Stats& stats, double soak_s);

// Every workload judged (soak_record.h): how many and the violations, with their log tails.
struct Workloads {
  int quiet = 0, quiet_ok = 0;
  int others = 0, others_ok = 0;
  std::map<std::string, int> expected;  // explaining fault kind -> failures
  std::vector<std::string> violations;  // description, why, and log tail
};
// Writes faults.log and workloads.log under the node's logs.
Workloads JudgeWorkloads(const Stats& stats, const SoakNode& node, const Load& load);

void ReportWorkloads(Report& report, const Stats& stats, const Workloads& w);

// The invariants on allocation (no double booking; contiguous and connected when possible), on
// kubelet restarts, and on workloads (quiet ones exit 0, failures explained, pods stopped).
void CheckAllocation(Report& report, const Stats& stats, const Minimums& min);
void CheckRestarts(Report& report, const Stats& stats, const Minimums& min);
void CheckWorkloads(Report& report, const Stats& stats, const Workloads& w, const Minimums& min);

}  // namespace neuron::soak
