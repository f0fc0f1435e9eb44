#include "top/node_health.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/base/component_log.h"
#include "http/local_client.h"
#include "top/format.h"

namespace neuron::top {
namespace {

using nlohmann::json;

std::optional<HealthState> StateNamed(std::string_view name) {
  for (HealthState s : kHealthStates) {
    if (HealthStateName(s) == name) return s;
  }
  return std::nullopt;
}

// One device or EFA entry of the agent's document. Text from the agent goes to a terminal: made
// safe here, once.
absl::StatusOr<HealthRow> RowFromJson(const json& j) {
  HealthRow row;
  const std::optional<HealthState> state = StateNamed(j.value("state", ""));
  if (!state) return absl::InvalidArgumentError("an entry without a known state");
  row.state = *state;
  row.present = j.value("present", true);
  row.degraded = j.value("degraded", false);
  if (j.value("withheld", false)) {
    const json r = j.value("remediation", json::object());
    const std::string phase = r.is_object() ? r.value("phase", "") : "";
    row.withheld = TerminalSafe(phase.empty() ? "withheld" : "reset " + phase);
  }
  for (const json& c : j.value("components", json::array())) {
    if (!c.is_string()) continue;
    if (std::optional<HealthComponent> known = HealthComponentNamed(c.get<std::string>())) {
      row.components.Add(*known);
    }
  }
  for (const json& r : j.value("reasons", json::array())) {
    if (r.is_string()) row.reasons.push_back(TerminalSafe(r.get<std::string>()));
  }
  return row;
}

HealthRow RowFromVerdict(const DeviceHealth& h) {
  return {.device = -1,
          .efa = "",
          .present = true,
          .state = h.state,
          .components = h.components,
          .reasons = h.reasons,
          .degraded = h.degraded(),
          .withheld = ""};
}

}  // namespace

const HealthRow* NodeHealthView::FindDevice(int index) const {
  for (const HealthRow& r : devices) {
    if (r.device == index) return &r;
  }
  return nullptr;
}

namespace {

std::string StateText(const HealthRow& row) {
  const std::string first = row.reasons.empty() ? "" : row.reasons.front();
  switch (row.state) {
    case HealthState::kHealthy:
      return row.degraded ? "healthy, degraded" : "healthy";
    case HealthState::kUnhealthy:
      return "unhealthy: " + (row.components.empty() ? first : row.components.Join());
    case HealthState::kUnknown:
      return "unknown: " + first;
  }
  return "unknown";
}

}  // namespace

std::string HealthText(const HealthRow& row) {
  if (row.withheld.empty()) return StateText(row);
  return StateText(row) + ", withheld" +
         (row.withheld == "withheld" ? std::string() : " (" + row.withheld + ")");
}

std::vector<const HealthRow*> NotHealthy(const NodeHealthView& view) {
  std::vector<const HealthRow*> out;
  for (const std::vector<HealthRow>* rows : {&view.devices, &view.efas}) {
    for (const HealthRow& r : *rows) {
      if (r.state != HealthState::kHealthy || r.degraded || !r.withheld.empty()) {
        out.push_back(&r);
      }
    }
  }
  return out;
}

namespace {

// "15 healthy, 1 unhealthy": the states present, in kHealthStates' order.
std::string Counts(const std::vector<HealthRow>& rows) {
  std::vector<std::string> parts;
  for (HealthState s : kHealthStates) {
    const auto n =
        std::count_if(rows.begin(), rows.end(), [s](const HealthRow& r) { return r.state == s; });
    if (n > 0) parts.push_back(fmt::format("{} {}", n, HealthStateName(s)));
  }
  return parts.empty() ? "none" : fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

std::string HealthSummary(const NodeHealthView& view) {
  std::string out = fmt::format("Health ({}): devices {}",
                                view.from_agent ? "agent" : "this read only", Counts(view.devices));
  if (!view.efas.empty()) out += "; EFA " + Counts(view.efas);
  return out;
}

std::string OwnReadNotice(std::string_view agent, std::string_view why) {
  return fmt::format(
      "health from this read only (agent at {} not reachable: {}): ECC history and kernel-log "
      "records not judged",
      agent, why);
}

absl::StatusOr<NodeHealthView> ParseAgentHealth(std::string_view body, std::string_view agent) {
  const json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("devices") || !doc["devices"].is_array()) {
    return absl::InvalidArgumentError("GET /health: not a health document");
  }
  NodeHealthView view{.known = true,
                      .from_agent = true,
                      .agent = std::string(agent),
                      .notice = "",
                      .stale = doc.value("stale", false),
                      .devices = {},
                      .efas = {}};
  for (const json& d : doc["devices"]) {
    absl::StatusOr<HealthRow> row = RowFromJson(d);
    if (!row.ok() || !d.contains("device") || !d["device"].is_number_integer()) {
      return absl::InvalidArgumentError("GET /health: a device entry without a device or state");
    }
    row->device = d["device"].get<int>();
    view.devices.push_back(*std::move(row));
  }
  for (const json& e : doc.value("efas", json::array())) {
    absl::StatusOr<HealthRow> row = RowFromJson(e);
    if (!row.ok() || !e.contains("name") || !e["name"].is_string()) continue;
    row->efa = TerminalSafe(e["name"].get<std::string>());
    view.efas.push_back(*std::move(row));
  }
  std::sort(view.devices.begin(), view.devices.end(),
            [](const HealthRow& a, const HealthRow& b) { return a.device < b.device; });
  return view;
}

std::optional<uint64_t> AgentHealthGeneration(std::string_view body) {
  const json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("generation")) return std::nullopt;
  const json& g = doc["generation"];
  if (!g.is_number_unsigned()) return std::nullopt;
  return g.get<uint64_t>();
}

NodeHealthView JudgeOwnRead(const HealthEvidence& evidence, std::string notice) {
  NodeHealthView view;
  view.known = true;
  view.notice = std::move(notice);
  for (const auto& [index, d] : evidence.devices()) {
    HealthRow row = RowFromVerdict(JudgeDevice(d, EvidenceClasses::All()));
    row.device = index;
    row.present = d.present;
    view.devices.push_back(std::move(row));
  }
  for (const auto& [name, f] : evidence.efas()) {
    HealthRow row = RowFromVerdict(JudgeEfa(f, EvidenceClasses::All()));
    row.efa = name;
    row.present = f.present;
    view.efas.push_back(std::move(row));
  }
  return view;
}

HealthSource::HealthSource(HealthSourceOptions options) : options_(std::move(options)) {}
HealthSource::~HealthSource() = default;

absl::StatusOr<NodeHealthView> HealthSource::AskAgent() {
  const std::string path =
      generation_ ? fmt::format("/health?unless={}", *generation_) : std::string("/health");
  absl::StatusOr<LocalResponse> got =
      LocalGet(options_.agent, path, {.timeout = options_.timeout, .max_response_bytes = 1 << 20});
  if (!got.ok()) return got.status();
  if (got->status == 304 && generation_) return last_answer_;
  if (got->status != 200) {
    return absl::UnavailableError(fmt::format("GET /health answered {}", got->status));
  }
  absl::StatusOr<NodeHealthView> view = ParseAgentHealth(got->body, options_.agent);
  if (!view.ok()) return view.status();
  generation_ = AgentHealthGeneration(got->body);
  last_answer_ = *view;
  return view;
}

NodeHealthView HealthSource::ReadOwn(const std::shared_ptr<const Inventory>& inventory,
                                     std::string_view why) {
  if (own_ == nullptr) {
    // Its own logger: the lines are about this read of the node, not the agent's.
    own_ = std::make_unique<HealthEvidence>(
        RootPaths(options_.root), ComponentLogger("top.health"),
        HealthEvidenceOptions{.heartbeat_period = std::chrono::milliseconds(1000),
                              .poll_state = true});
  }
  if (inventory != nullptr && inventory != applied_) {
    own_->ApplyScan(*inventory);
    applied_ = inventory;
  }
  own_->PollCounters(std::chrono::steady_clock::now());
  NodeHealthView view = JudgeOwnRead(*own_, OwnReadNotice(options_.agent, why));
  view.agent = options_.agent;
  return view;
}

NodeHealthView HealthSource::Read(const std::shared_ptr<const Inventory>& inventory) {
  absl::StatusOr<NodeHealthView> agent = AskAgent();
  if (agent.ok()) return *std::move(agent);
  generation_.reset();  // the next answer is a whole document
  const std::string why(agent.status().message());
  return ReadOwn(inventory, why);
}

}  // namespace neuron::top
