#pragma once
// GET /health on the plugin's --listen socket, in both API modes: the node's health as the plugin
// judges it, for neuron-dra-api (the Node condition) and any automation on the node
// (plugin/README.md#health-api). Per device and EFA interface: the state (healthy, unhealthy,
// unknown), the components at fault, every reason, degraded; whether the evidence is stale; and
// the Node condition AWS's node-problem-detector would set (core/node/device_health.h).
//
// `generation` is a hash of the document: `?unless=<generation>` answers 304 without a body
// while nothing in it changed, so a poller pays for a document only when health moved.
// evidence_time (when the evidence was last read) is outside the hash: it moves every poll.
//
// Pure; thread-safe.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "plugin/node_state.h"
#include "plugin/remediation.h"

namespace neuron::plugin {

struct HealthResponse {
  int status = 200;  // 200, or 304 for `unless` equal to the generation
  uint64_t generation = 0;
  std::string body;  // JSON; empty on 304
};

// What the document says beside the view: the classes that set the Node condition (the policy's
// `node` action), the devices in a pod's allocation or prepared claim, and the resets under way.
struct HealthContext {
  EvidenceClasses condemning = kPermanentClasses;
  std::set<int> in_use;
  std::map<int, RemediationStatus> remediation;
};

// `evidence_time` is NodeState::evidence_time(); `stale` whether it is older than
// health.stale_after (the evidence's verdicts then say nothing about now).
HealthResponse BuildHealthResponse(
    const NodeView& view, std::optional<std::chrono::system_clock::time_point> evidence_time,
    bool stale, std::optional<uint64_t> unless, const HealthContext& context = {});

}  // namespace neuron::plugin
