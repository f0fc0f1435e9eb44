#pragma once
// The active check's results (top/health_check.h): per device and per link, the verdicts drawn
// from the children's outcomes and the baseline, and the report as text or JSON. Pure functions
// over a Report; thread-compatible.

#include <filesystem>
#include <string>
#include <vector>

#include "top/health_check_internal.h"

namespace neuron::top::check {

enum class Verdict { kPassed, kFailed, kSkipped };
const char* VerdictName(Verdict v);  // "passed", "failed", "skipped"

struct CoreResult {
  int core = 0;  // global logical core id (NEURON_RT_VISIBLE_CORES)
  std::string program;
  ChildOutcome outcome;
  int64_t baseline_us = 0;  // 0: none to compare with
};

struct DeviceResult {
  int device = -1;
  Verdict verdict = Verdict::kPassed;
  std::string detail = {};  // why skipped or failed
  std::vector<CoreResult> cores = {};
};

struct LinkResult {
  int a = -1;
  int b = -1;
  std::string program;
  std::vector<ChildOutcome> ranks;  // rank 0 on a, rank 1 on b
  int64_t baseline_us = 0;
  Verdict verdict = Verdict::kPassed;
  std::string detail = {};
};

struct Report {
  std::string programs;
  std::string libnrt;
  std::vector<DeviceResult> devices;
  std::vector<LinkResult> links;
  std::filesystem::path baseline_path = {};
  std::string baseline = {};  // "recorded", "compared", "none" (not recorded: a failure), ...
  std::vector<std::string> notes = {};
  bool failed = false;
  double wall_s = 0;
};

// Compares every passed outcome with STATE/health-check/baseline.json (a slow one fails
// "slow"), or records the baseline when there is none and everything passed.
void ApplyBaseline(const std::filesystem::path& path, Report* report);
// The device and link verdicts from their outcomes, and whether anything failed.
void Judge(Report* report);

std::string RenderText(const Report& report);
std::string RenderJson(const Report& report);

}  // namespace neuron::top::check
