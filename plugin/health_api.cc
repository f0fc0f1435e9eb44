#include "plugin/health_api.h"

#include <string_view>
#include <utility>
#include <vector>

#include "core/base/hash.h"
#include "fmt/chrono.h"
#include "nlohmann/json.hpp"

namespace neuron::plugin {
namespace {

using nlohmann::json;

json Components(const HealthComponents& components) {
  json out = json::array();
  for (HealthComponent c : components.List()) out.push_back(HealthComponentName(c));
  return out;
}

// One device's or EFA's entry: `key` names it ("device": 3, "name": "rdmap16s27").
json Verdict(std::string_view key, const json& id, bool present, const DeviceHealth& h) {
  json out = {{key, id},
              {"present", present},
              {"state", HealthStateName(h.state)},
              {"components", Components(h.components)},
              {"reasons", h.reasons},
              {"degraded", h.degraded()}};
  if (!h.hw_error_types.empty()) out["hw_errors"] = h.hw_error_types;
  return out;
}

// A device whose resets gave up stays withheld until the plugin restarts: the node has lost it
// whatever its evidence says now, so the condition says so for AWS's node repair to act on.
void AddGaveUp(const std::map<int, RemediationStatus>& remediation, NodeConditionVerdict* c) {
  for (const auto& [index, r] : remediation) {
    if (r.phase != kPhaseGaveUp) continue;
    if (!c->problem) {
      *c = {.problem = true,
            .reason = std::string{kNodeConditionErrorPrefix} + "RESET_FAILED",
            .message = ""};
    }
    c->message += fmt::format("{}neuron{}: reset gave up after {} tries ({})",
                              c->message.empty() ? "" : " | ", index, r.tries, r.message);
  }
}

json Condition(const NodeView& view, bool stale, const HealthContext& context) {
  // Stale evidence says nothing about now: the condition is Unknown, not the last verdict.
  if (stale) {
    return {{"type", kNodeConditionType},
            {"status", "Unknown"},
            {"reason", kNodeConditionUnknown},
            {"message", "the plugin's health evidence is stale"}};
  }
  std::vector<std::pair<int, DeviceHealth>> devices;
  devices.reserve(view.devices.size());
  for (const auto& [index, d] : view.devices) devices.emplace_back(index, d.health);
  NodeConditionVerdict c = JudgeNodeCondition(devices, context.condemning);
  AddGaveUp(context.remediation, &c);
  return {{"type", kNodeConditionType},
          {"status", c.problem ? "True" : "False"},
          {"reason", c.reason},
          {"message", c.message}};
}

}  // namespace

HealthResponse BuildHealthResponse(
    const NodeView& view, std::optional<std::chrono::system_clock::time_point> evidence_time,
    bool stale, std::optional<uint64_t> unless, const HealthContext& context) {
  json doc = json::object();
  json devices = json::array();
  for (const auto& [index, d] : view.devices) {
    json v = Verdict("device", index, d.present, d.health);
    v["action"] = ActionName(d.action);
    v["withheld"] = d.withheld;
    v["in_use"] = context.in_use.contains(index);
    if (const auto r = context.remediation.find(index); r != context.remediation.end()) {
      v["remediation"] = {
          {"phase", r->second.phase}, {"tries", r->second.tries}, {"message", r->second.message}};
    }
    devices.push_back(std::move(v));
  }
  json efas = json::array();
  for (const auto& [name, e] : view.efas) {
    efas.push_back(Verdict("name", name, e.present, e.health));
  }
  doc["devices"] = std::move(devices);
  doc["efas"] = std::move(efas);
  doc["stale"] = stale;
  doc["node_condition"] = Condition(view, stale, context);
  HealthResponse out;
  // 53 bits: exact in any JSON reader's number.
  out.generation = Fnv1a64(doc.dump()) & ((uint64_t{1} << 53) - 1);
  if (unless && *unless == out.generation) {
    out.status = 304;
    return out;
  }
  doc["generation"] = out.generation;
  if (evidence_time) {
    doc["evidence_time"] =
        fmt::format("{:%FT%TZ}", std::chrono::floor<std::chrono::seconds>(*evidence_time));
  }
  out.body = doc.dump();
  return out;
}

}  // namespace neuron::plugin
