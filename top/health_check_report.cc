#include "top/health_check_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

namespace neuron::top::check {
namespace {

// Every passed outcome's time, by program.
std::map<std::string, std::vector<int64_t>> PassedTimes(const Report& r) {
  std::map<std::string, std::vector<int64_t>> times;
  for (const DeviceResult& d : r.devices) {
    for (const CoreResult& c : d.cores) {
      if (c.outcome.passed) times[c.program].push_back(c.outcome.execute_us);
    }
  }
  for (const LinkResult& l : r.links) {
    for (const ChildOutcome& o : l.ranks) {
      if (o.passed) times[l.program].push_back(o.execute_us);
    }
  }
  return times;
}

int64_t MedianUs(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void MarkSlow(const Baseline& b, const std::string& program, ChildOutcome* o, int64_t* base) {
  const auto it = b.execute_us.find(program);
  if (it == b.execute_us.end()) return;
  *base = it->second;
  if (!o->passed || !IsSlow(b, program, o->execute_us)) return;
  o->passed = false;
  o->failure = "slow";
  o->detail =
      fmt::format("{} us against a baseline of {} us (slower than {}x and by more than {} us)",
                  o->execute_us, it->second, b.factor, b.margin_us);
}

bool AllPassed(const Report& r) {
  for (const DeviceResult& d : r.devices) {
    for (const CoreResult& c : d.cores) {
      if (!c.outcome.passed) return false;
    }
  }
  for (const LinkResult& l : r.links) {
    for (const ChildOutcome& o : l.ranks) {
      if (!o.passed) return false;
    }
  }
  return true;
}

// A device's or link's first failure in a few words.
std::string FailureText(const ChildOutcome& o) {
  return o.detail.empty() ? o.failure : o.failure + ": " + o.detail;
}

nlohmann::ordered_json OutcomeJson(const ChildOutcome& o, int64_t baseline_us) {
  nlohmann::ordered_json j = {{"verdict", o.passed ? "passed" : "failed"},
                              {"failure", o.failure},
                              {"detail", o.detail},
                              {"execute_us", o.execute_us}};
  if (baseline_us > 0) j["baseline_us"] = baseline_us;
  return j;
}

}  // namespace

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kPassed:
      return "passed";
    case Verdict::kFailed:
      return "failed";
    case Verdict::kSkipped:
      return "skipped";
  }
  return "unknown";
}

void ApplyBaseline(const std::filesystem::path& path, Report* r) {
  r->baseline_path = path;
  absl::StatusOr<Baseline> b = LoadBaseline(path);
  if (!b.ok() && !absl::IsNotFound(b.status())) {
    r->baseline = "unreadable";
    r->notes.push_back(fmt::format("times not compared: {}", std::string{b.status().message()}));
    return;
  }
  Baseline base = b.ok() ? *b : Baseline{};
  for (DeviceResult& d : r->devices) {
    for (CoreResult& c : d.cores) MarkSlow(base, c.program, &c.outcome, &c.baseline_us);
  }
  for (LinkResult& l : r->links) {
    for (ChildOutcome& o : l.ranks) MarkSlow(base, l.program, &o, &l.baseline_us);
  }
  r->baseline = b.ok() ? "compared" : "none";
  // Only a node on which everything passed measures what healthy is; a program new to the
  // baseline (links checked for the first time) is added then too.
  if (!AllPassed(*r)) return;
  bool added = false;
  for (const auto& [program, times] : PassedTimes(*r)) {
    if (!base.execute_us.contains(program)) {
      base.execute_us[program] = std::max<int64_t>(1, MedianUs(times));
      added = true;
    }
  }
  if (!added) return;
  if (absl::Status s = SaveBaseline(path, base); !s.ok()) {
    r->notes.push_back(fmt::format("baseline not recorded: {}", std::string{s.message()}));
    return;
  }
  r->baseline = b.ok() ? "compared, extended" : "recorded";
}

void Judge(Report* r) {
  r->failed = false;
  for (DeviceResult& d : r->devices) {
    if (d.verdict == Verdict::kSkipped) continue;
    d.verdict = Verdict::kPassed;
    for (const CoreResult& c : d.cores) {
      if (c.outcome.passed) continue;
      if (d.verdict == Verdict::kPassed) {
        d.detail = fmt::format("core {}: {}", c.core, FailureText(c.outcome));
      }
      d.verdict = Verdict::kFailed;
    }
    r->failed = r->failed || d.verdict == Verdict::kFailed;
  }
  for (LinkResult& l : r->links) {
    l.verdict = Verdict::kPassed;
    for (size_t i = 0; i < l.ranks.size(); ++i) {
      if (l.ranks[i].passed) continue;
      if (l.verdict == Verdict::kPassed) {
        l.detail = fmt::format("device {}: {}", i == 0 ? l.a : l.b, FailureText(l.ranks[i]));
      }
      l.verdict = Verdict::kFailed;
    }
    r->failed = r->failed || l.verdict == Verdict::kFailed;
  }
}

std::string RenderText(const Report& r) {
  std::string out = fmt::format("Health check: programs {}, libnrt {}\n", r.programs, r.libnrt);
  out += fmt::format("{:<8}{:<9}{:<22}{}\n", "DEVICE", "VERDICT", "TIMES (us)", "DETAIL");
  for (const DeviceResult& d : r.devices) {
    std::string times;
    for (const CoreResult& c : d.cores) {
      times += fmt::format("{}{}", times.empty() ? "" : " ", c.outcome.execute_us);
    }
    out += fmt::format("{:<8}{:<9}{:<22}{}\n", d.device, VerdictName(d.verdict), times, d.detail);
  }
  if (!r.links.empty()) {
    out += fmt::format("{:<8}{:<9}{:<22}{}\n", "LINK", "VERDICT", "TIMES (us)", "DETAIL");
  }
  for (const LinkResult& l : r.links) {
    std::string times;
    for (const ChildOutcome& o : l.ranks) {
      times += fmt::format("{}{}", times.empty() ? "" : " ", o.execute_us);
    }
    out += fmt::format("{:<8}{:<9}{:<22}{}\n", fmt::format("{}-{}", l.a, l.b),
                       VerdictName(l.verdict), times, l.detail);
  }
  for (const std::string& n : r.notes) out += "note: " + n + "\n";
  const auto count = [](const auto& rows, Verdict v) {
    return std::count_if(rows.begin(), rows.end(), [v](const auto& x) { return x.verdict == v; });
  };
  out += fmt::format(
      "Verdict: {}: devices {} passed, {} failed, {} skipped; links {} passed, {} failed; "
      "baseline {} ({}); {:.2f} s\n",
      r.failed ? "failed" : "passed", count(r.devices, Verdict::kPassed),
      count(r.devices, Verdict::kFailed), count(r.devices, Verdict::kSkipped),
      count(r.links, Verdict::kPassed), count(r.links, Verdict::kFailed),
      r.baseline.empty() ? "none" : r.baseline, r.baseline_path.string(), r.wall_s);
  return out;
}

std::string RenderJson(const Report& r) {
  nlohmann::ordered_json devices = nlohmann::ordered_json::array();
  for (const DeviceResult& d : r.devices) {
    nlohmann::ordered_json cores = nlohmann::ordered_json::array();
    for (const CoreResult& c : d.cores) {
      nlohmann::ordered_json j = {{"core", c.core}, {"program", c.program}};
      j.update(OutcomeJson(c.outcome, c.baseline_us));
      cores.push_back(std::move(j));
    }
    devices.push_back({{"device", d.device},
                       {"verdict", VerdictName(d.verdict)},
                       {"detail", d.detail},
                       {"cores", std::move(cores)}});
  }
  nlohmann::ordered_json links = nlohmann::ordered_json::array();
  for (const LinkResult& l : r.links) {
    nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
    for (const ChildOutcome& o : l.ranks) ranks.push_back(OutcomeJson(o, l.baseline_us));
    links.push_back({{"devices", {l.a, l.b}},
                     {"program", l.program},
                     {"verdict", VerdictName(l.verdict)},
                     {"detail", l.detail},
                     {"ranks", std::move(ranks)}});
  }
  const nlohmann::ordered_json doc = {
      {"verdict", r.failed ? "failed" : "passed"},
      {"programs", r.programs},
      {"libnrt", r.libnrt},
      {"baseline",
       {{"path", r.baseline_path.string()}, {"state", r.baseline.empty() ? "none" : r.baseline}}},
      {"wall_s", r.wall_s},
      {"notes", r.notes},
      {"devices", std::move(devices)},
      {"links", std::move(links)}};
  return doc.dump(2) + "\n";
}

}  // namespace neuron::top::check
