#include "core/node/device_health.h"

#include <algorithm>
#include <utility>

#include "core/driver/sysfs_names.h"
#include "fmt/format.h"
#include "fmt/ranges.h"

namespace neuron {
namespace {

using C = HealthComponent;
using E = EvidenceClass;

// Collects a verdict: faults first, then what could not be told.
class Verdict {
 public:
  explicit Verdict(EvidenceClasses counted) : counted_(counted) {}

  void Fault(EvidenceClass c, HealthComponents components, std::string reason) {
    if (!counted_.Has(c)) return;
    out_.state = HealthState::kUnhealthy;
    out_.components.Add(components);
    out_.classes.Add(c);
    faults_.push_back(std::move(reason));
  }
  void Degraded(EvidenceClass c) {
    if (!counted_.Has(c)) return;
    out_.degraded_classes.Add(c);
  }
  void Unknown(EvidenceClass c, std::string reason) {
    if (!counted_.Has(c)) return;
    out_.classes.Add(c);
    unknowns_.push_back(std::move(reason));
  }
  bool counts(EvidenceClass c) const { return counted_.Has(c); }
  DeviceHealth& out() { return out_; }

  DeviceHealth Done() && {
    if (out_.state != HealthState::kUnhealthy && !unknowns_.empty()) {
      out_.state = HealthState::kUnknown;
    }
    out_.reasons = std::move(faults_);
    for (std::string& u : unknowns_) out_.reasons.push_back(std::move(u));
    return std::move(out_);
  }

 private:
  const EvidenceClasses counted_;
  DeviceHealth out_;
  std::vector<std::string> faults_;
  std::vector<std::string> unknowns_;
};

HealthComponents Only(HealthComponent c) {
  HealthComponents out;
  out.Add(c);
  return out;
}

void JudgeState(const DeviceEvidence& d, Verdict& v) {
  if (!d.present) {
    if (d.driver_gone) {
      v.Unknown(E::kAbsence, "the Neuron driver is not loaded");
    } else {
      v.Fault(E::kAbsence, Only(C::kLinkHost), "absent");
    }
    return;
  }
  if (!d.state) {
    v.Unknown(E::kState, "device state cannot be read");
  } else if (*d.state != DeviceState::kReady) {
    // RESET (a reset under way) and INVALID (a reset that failed): the firmware's reset service.
    v.Fault(E::kState, Only(C::kFirmwareServiceProcessor),
            fmt::format("state {}", DeviceStateName(*d.state)));
  }
}

// A counter class's fault as the verdict says it, "<this> (<components>)": its name, or for the
// uncorrected ECC counters the words the reasons have always used.
std::string_view CounterFault(EvidenceClass c) {
  return c == E::kEcc ? "uncorrected ECC" : EvidenceClassName(c);
}

// The counter rows that rose (core/driver/health_counters.h): a kFault class's, one reason per
// class naming the components at fault; a kDegraded class's flag the device degraded.
void JudgeCounterRows(const DeviceEvidence& d, Verdict& v) {
  std::array<HealthComponents, kEvidenceClassCount> rose{};
  for (size_t i = 0; i < kHealthCounters.size(); ++i) {
    if (!d.counter_rose[i]) continue;
    const HealthCounter& c = kHealthCounters[i];
    if (c.meaning == CounterMeaning::kDegraded) {
      v.Degraded(c.evidence_class);
      continue;
    }
    const auto k = static_cast<size_t>(c.evidence_class);
    rose[k].Add(c.component);
  }
  for (size_t k = 0; k < rose.size(); ++k) {
    if (rose[k].empty()) continue;
    v.Fault(static_cast<EvidenceClass>(k), rose[k],
            fmt::format("{} ({})", CounterFault(static_cast<EvidenceClass>(k)), rose[k].Join()));
  }
}

void JudgeCounters(const DeviceEvidence& d, Verdict& v) {
  JudgeCounterRows(d, v);
  if (!d.hw_errors.empty()) {
    HealthComponents named;
    for (const std::string& t : d.hw_errors) {
      if (std::optional<C> c = ComponentOfHwError(t)) named.Add(*c);
    }
    v.Fault(E::kHwErrors, named, fmt::format("NEURON_HW_ERR {}", fmt::join(d.hw_errors, ",")));
    if (v.counts(E::kHwErrors)) v.out().hw_error_types = d.hw_errors;
  }
  if (!d.reported.known.empty() || !d.reported.unknown.empty()) {
    std::string listed = d.reported.known.Join();
    for (const std::string& u : d.reported.unknown) listed += (listed.empty() ? "" : ",") + u;
    v.Fault(E::kComponents, d.reported.known, fmt::format("driver: unhealthy {}", listed));
  }
  // What is known about the files is as of the last poll, which skips an absent device.
  if (d.present) {
    if (d.heartbeat_stalled) v.Unknown(E::kHeartbeat, "healthcheck_heartbeat stalled");
    for (const UnreadableFile& f : d.unreadable) {
      v.Unknown(f.evidence_class, fmt::format("{} cannot be read", f.path));
    }
  }
}

}  // namespace

std::string_view HealthStateName(HealthState s) {
  switch (s) {
    case HealthState::kHealthy:
      return "healthy";
    case HealthState::kUnhealthy:
      return "unhealthy";
    case HealthState::kUnknown:
      return "unknown";
  }
  return "unknown";
}

DeviceHealth JudgeDevice(const DeviceEvidence& d, EvidenceClasses counted) {
  Verdict v(counted);
  JudgeState(d, v);
  JudgeCounters(d, v);  // an absent device keeps the faults seen before it went
  return std::move(v).Done();
}

DeviceHealth JudgeEfa(const EfaEvidence& f, EvidenceClasses counted) {
  Verdict v(counted);
  if (!f.present) {
    v.Fault(E::kAbsence, Only(C::kLinkEfa), "absent");
  } else if (f.port_state != "ACTIVE") {
    v.Fault(E::kEfaPort, Only(C::kLinkEfa),
            fmt::format("port {}", f.port_state.empty() ? "unknown" : f.port_state));
  }
  return std::move(v).Done();
}

std::optional<HealthComponent> ComponentOfHwError(std::string_view type) {
  static constexpr std::array<std::pair<std::string_view, C>, 5> kMap{{
      {"SRAM_UNCORRECTABLE_ERROR", C::kSram},
      {"NC_UNCORRECTABLE_ERROR", C::kSram},
      {"HBM_UNCORRECTABLE_ERROR", C::kHbm},
      {"DMA_ERROR", C::kAxiFabric},
      {"HANG_ON_COLLECTIVES", C::kLinkIntraserver},
  }};
  for (const auto& [t, c] : kMap) {
    if (t == type) return c;
  }
  return std::nullopt;
}

namespace {

// The NEURON_HW_ERR type a component's fault reads as, for the condition's reason: the types
// AWS's node-problem-detector knows where one fits, else the component's own name.
std::string TypeOfComponent(HealthComponent c) {
  switch (c) {
    case C::kHbm:
      return "HBM_UNCORRECTABLE_ERROR";
    case C::kSram:
      return "SRAM_UNCORRECTABLE_ERROR";
    case C::kAxiFabric:
      return "DMA_ERROR";
    default: {
      std::string out(HealthComponentName(c));
      std::transform(out.begin(), out.end(), out.begin(),
                     [](char ch) { return static_cast<char>(std::toupper(ch)); });
      return out;
    }
  }
}

bool Condemns(const DeviceHealth& h, EvidenceClasses condemning) {
  return h.state == HealthState::kUnhealthy && h.classes.Intersects(condemning);
}

}  // namespace

NodeConditionVerdict JudgeNodeCondition(const std::vector<std::pair<int, DeviceHealth>>& devices,
                                        EvidenceClasses condemning) {
  NodeConditionVerdict out{
      .problem = false, .reason = std::string{kNodeConditionNoError}, .message = ""};
  std::vector<std::string> parts;
  for (const auto& [index, h] : devices) {
    if (!Condemns(h, condemning)) continue;
    if (!out.problem) {
      std::string type = !h.hw_error_types.empty() && !h.hw_error_types.front().empty()
                             ? h.hw_error_types.front()
                         : !h.components.empty() ? TypeOfComponent(h.components.List().front())
                                                 : "UNKNOWN";
      out.problem = true;
      out.reason = std::string{kNodeConditionErrorPrefix} + type;
    }
    parts.push_back(fmt::format("neuron{}: {}", index, fmt::join(h.reasons, "; ")));
  }
  out.message = out.problem ? fmt::format("{}", fmt::join(parts, " | "))
                            : "no Neuron device shows a hardware error";
  return out;
}

}  // namespace neuron
