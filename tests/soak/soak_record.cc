#include "tests/soak/soak_record.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>

namespace neuron::soak {

namespace {

constexpr int kNrtFailure = 1;         // nrt_init: the driver refuses to open a device not READY
constexpr int kNrtTimeout = 5;         // NRT_TIMEOUT
constexpr int kNrtHwError = 6;         // NRT_HW_ERROR: device not READY (reset, INVALID, absent)
constexpr double kClockSlackS = 0.05;  // our timestamps vs the daemon's and the reaper's

// The status an execution takes an injected fault to (executor.cc FaultStatus); nullopt for a
// kind that fails nothing (nan: the step is skipped) or that we do not inject.
std::optional<int> InjectedStatus(std::string_view fault) {
  if (fault == "hbm-ue") return 1201;
  if (fault == "sram-ue") return 1202;
  if (fault == "dma-abort") return 1203;
  if (fault == "hang") return kNrtTimeout;
  return std::nullopt;
}

bool Holds(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// When the effect of `events[i]` on its device ends: the first later accepted event in `ends`
// (by kind) on the same device, at its reply plus `extra`; infinity when none came.
double EffectEnd(const std::vector<FaultEvent>& events, size_t i,
                 const std::vector<std::pair<std::string_view, double>>& ends) {
  const FaultEvent& e = events[i];
  for (size_t j = i + 1; j < events.size(); ++j) {
    const FaultEvent& f = events[j];
    if (!f.accepted || f.device != e.device) continue;
    for (const auto& [kind, extra] : ends) {
      if (f.kind == kind) return f.replied_s + extra;
    }
  }
  return std::numeric_limits<double>::infinity();
}

// A disruption of `w`'s devices during its life: the codes it explains and a description.
struct Hit {
  std::set<int> codes;
  std::set<int> init_codes;  // what nrt_init returns instead, when the workload started in it
  std::string what;
  std::string kind;
};

std::optional<Hit> HitOf(const std::vector<FaultEvent>& events, size_t i, const WorkloadRecord& w,
                         int cores_per_device, double reset_s, double end_s) {
  const FaultEvent& e = events[i];
  if (!e.accepted || e.device < 0 || !Holds(w.devices, e.device)) return std::nullopt;
  Hit hit;
  double until = 0;
  if (e.kind.starts_with("inject ")) {
    const std::optional<int> status = InjectedStatus(e.kind.substr(7));
    if (!status) return std::nullopt;
    if (e.core && !Holds(w.cores, e.device * cores_per_device + *e.core)) return std::nullopt;
    hit.codes = {*status};
    // Pending until a completed reset or an unplug clears the device's faults.
    until = EffectEnd(events, i, {{"reset", reset_s}, {"unplug", 0.0}});
  } else if (e.kind == "reset") {
    hit.codes = {kNrtHwError};
    hit.init_codes = {kNrtFailure};
    until = e.replied_s + reset_s;
  } else if (e.kind == "reset --fail") {
    hit.codes = {kNrtHwError};
    hit.init_codes = {kNrtFailure};
    until = EffectEnd(events, i, {{"reset", reset_s}, {"unplug", 0.0}});
  } else if (e.kind == "unplug") {
    hit.codes = {kNrtHwError};
    hit.init_codes = {kNrtFailure};
    until = EffectEnd(events, i, {{"plug", 0.0}});
  } else {
    return std::nullopt;
  }
  if (e.sent_s > end_s + kClockSlackS || until < w.start_s - kClockSlackS) return std::nullopt;
  hit.what = Describe(e);
  hit.kind = e.kind;
  return hit;
}

std::string Join(const std::set<int>& s) {
  std::string out;
  for (int v : s) out += (out.empty() ? "" : ",") + std::to_string(v);
  return out.empty() ? "none" : out;
}

}  // namespace

bool IsDamage(std::string_view kind) {
  return kind.starts_with("inject ") || kind == "unplug" || kind == "reset --fail" ||
         kind == "efa-down";
}

std::set<int> FailureCodes(std::string_view log) {
  std::set<int> out;
  size_t pos = 0;
  while (pos < log.size()) {
    size_t eol = log.find('\n', pos);
    if (eol == std::string_view::npos) eol = log.size();
    std::string_view line = log.substr(pos, eol - pos);
    pos = eol + 1;
    if (!line.starts_with("neuron-sim run:") || !line.ends_with(")")) continue;
    const size_t open = line.rfind('(');
    if (open == std::string_view::npos) continue;
    int code = 0;
    const char* first = line.data() + open + 1;
    const char* last = line.data() + line.size() - 1;
    const auto [ptr, ec] = std::from_chars(first, last, code);
    if (ec == std::errc() && ptr == last) out.insert(code);
  }
  return out;
}

std::optional<int> InitFailureCode(std::string_view log) {
  const size_t at = log.find("neuron-sim run: nrt_init failed:");
  if (at == std::string_view::npos) return std::nullopt;
  const size_t eol = std::min(log.find('\n', at), log.size());
  const std::set<int> codes = FailureCodes(log.substr(at, eol - at));
  if (codes.size() != 1) return std::nullopt;
  return *codes.begin();
}

Verdict Classify(const WorkloadRecord& w, const std::vector<FaultEvent>& events,
                 int cores_per_device, double reset_s, double now_s, std::string_view log) {
  using Kind = Verdict::Kind;
  if (!w.exit_code) return {Kind::kViolation, "no exit status (never reaped)", ""};
  if (*w.exit_code == 0) return {Kind::kOk, "", ""};
  if (w.quiet) {
    return {Kind::kViolation, fmt::format("quiet workload exited {}", *w.exit_code), ""};
  }
  const std::set<int> codes = FailureCodes(log);
  const std::optional<int> init = InitFailureCode(log);
  const double end_s = w.end_s.value_or(now_s);
  std::set<int> explained;
  std::vector<std::string> hits;
  for (size_t i = 0; i < events.size(); ++i) {
    const std::optional<Hit> hit = HitOf(events, i, w, cores_per_device, reset_s, end_s);
    if (!hit) continue;
    for (int c : hit->codes) {
      if (codes.contains(c)) return {Kind::kExpected, hit->what, hit->kind};
    }
    if (init && hit->init_codes.contains(*init)) return {Kind::kExpected, hit->what, hit->kind};
    explained.insert(hit->codes.begin(), hit->codes.end());
    explained.insert(hit->init_codes.begin(), hit->init_codes.end());
    if (hits.size() < 4) hits.push_back(hit->what);
  }
  if (hits.empty()) {
    return {Kind::kViolation,
            fmt::format("exit {}, log codes {}, and no fault on its devices during its life",
                        *w.exit_code, Join(codes)),
            ""};
  }
  std::string list;
  for (const std::string& h : hits) list += "; " + h;
  return {Kind::kViolation,
          fmt::format("exit {}, log codes {}; the faults on its devices give {}{}", *w.exit_code,
                      Join(codes), Join(explained), list),
          ""};
}

std::string LastLines(std::string_view text, int lines) {
  if (text.ends_with('\n')) text.remove_suffix(1);
  size_t start = text.size();
  for (int i = 0; i < lines; ++i) {
    const size_t nl = start == 0 ? std::string_view::npos : text.rfind('\n', start - 1);
    if (nl == std::string_view::npos) return std::string(text);
    start = nl;
  }
  return std::string(text.substr(start + 1));
}

std::string Describe(const FaultEvent& e) {
  std::string target = e.device >= 0 ? fmt::format("device {}", e.device) : "efa " + e.efa;
  if (e.core) target += fmt::format(" core {}", *e.core);
  return fmt::format("{:.2f}s {} {} {}", e.sent_s, e.kind, target, e.accepted ? "ok" : "refused");
}

std::string Describe(const WorkloadRecord& w) {
  auto join = [](const std::vector<int>& v) {
    std::string out;
    for (int x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
    return out;
  };
  return fmt::format("#{} {}{} cores {} devices {} {:.2f}-{} s exit {}{} log {}", w.n, w.pod,
                     w.quiet ? " quiet" : "", join(w.cores), join(w.devices), w.start_s,
                     w.end_s ? fmt::format("{:.2f}", *w.end_s) : "running",
                     w.exit_code ? std::to_string(*w.exit_code) : "none",
                     w.stopped_by_kubelet ? " (pod deleted while it ran)" : "", w.log);
}

}  // namespace neuron::soak
