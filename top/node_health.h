#pragma once
// Device and EFA health as neuron-ls and neuron-top show it (docs/tools-ux.md#health): the agent's
// verdicts, asked from the device plugin's GET /health (plugin/health_api.h), or, when the
// agent cannot be reached, this process's own verdicts from its own read of the node through
// core's HealthEvidence (core/node/health_evidence.h) under every class of evidence. That read
// cannot see what the agent keeps over time: ECC counters that rose before it started and the
// kernel log's NEURON_HW_ERR records; the view's `notice` says so.
//
// HealthSource: thread-compatible, one owner (neuron-ls's main, neuron-top's feed thread).
// The rest is pure and thread-safe.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/discovery/inventory.h"
#include "core/node/device_health.h"
#include "core/node/health_evidence.h"

namespace neuron::top {

// The device plugin's --listen socket in the DaemonSet (deploy/), which serves GET /health.
inline constexpr std::string_view kDefaultAgent = "unix:/run/neuron-node-agent/plugin.sock";
// A local answer takes microseconds; a hung agent must not hold up a refresh.
inline constexpr std::chrono::milliseconds kAgentTimeout{200};

struct HealthRow {
  int device = -1;  // a device's index; -1 for an EFA interface
  std::string efa;  // an EFA interface's name; "" for a device
  bool present = true;
  HealthState state = HealthState::kUnknown;
  HealthComponents components;       // at fault (unhealthy)
  std::vector<std::string> reasons;  // first the one that decided
  bool degraded = false;             // corrected ECC rose (a flag, never a state)
  // Withheld from allocation by a check or the agent's reset: "" when not; else what the agent's
  // remediation says ("reset checking", "reset gave_up") or "withheld" (agent's answer only).
  std::string withheld = {};
  bool operator==(const HealthRow&) const = default;
};

struct NodeHealthView {
  bool known = false;       // false: not asked (a format that does not show health)
  bool from_agent = false;  // the agent's verdicts; else this process's own read
  std::string agent;        // the address asked
  // Set for this process's own read: that it is one, why, and what it cannot judge.
  std::string notice;
  bool stale = false;              // the agent says its evidence is older than its stale_after
  std::vector<HealthRow> devices;  // by index
  std::vector<HealthRow> efas;     // by name
  bool operator==(const NodeHealthView&) const = default;

  const HealthRow* FindDevice(int index) const;
};

// What a device's cell says: "healthy", "unhealthy: hbm,link_efa" (the first reason when no
// component is named), "unknown: <first reason>"; ", degraded" after a degraded healthy device;
// ", withheld (reset checking)" while a check or reset withholds it.
std::string HealthText(const HealthRow& row);

// Rows that are not simply healthy (unhealthy, unknown, degraded, withheld), devices first: the
// lines of neuron-top's health section.
std::vector<const HealthRow*> NotHealthy(const NodeHealthView& view);
// neuron-top's health section title: "Health (agent): devices 15 healthy, 1 unhealthy; EFA 8
// healthy", "(this read only)" for this process's own verdicts.
std::string HealthSummary(const NodeHealthView& view);

// "health from this read only (agent at unix:... not reachable: <why>): ECC history and
// kernel-log records not judged"
std::string OwnReadNotice(std::string_view agent, std::string_view why);

// The agent's GET /health document (plugin/health_api.h). Errors name what is malformed.
absl::StatusOr<NodeHealthView> ParseAgentHealth(std::string_view body, std::string_view agent);
// The generation of a GET /health document, for `?unless=`; nullopt when it has none.
std::optional<uint64_t> AgentHealthGeneration(std::string_view body);

// Verdicts from `evidence` under every class of evidence, with `notice`.
NodeHealthView JudgeOwnRead(const HealthEvidence& evidence, std::string notice);

struct HealthSourceOptions {
  std::filesystem::path root = "/";
  std::string agent = std::string(kDefaultAgent);
  std::chrono::milliseconds timeout = kAgentTimeout;
};

class HealthSource {
 public:
  explicit HealthSource(HealthSourceOptions options);
  ~HealthSource();

  // Asks the agent (after its first answer with `?unless=<generation>`, so that an unchanged
  // answer is a 304 and the last one stands). When it cannot be reached or answers garbage,
  // judges this process's own read: `inventory` is applied when it is not the one applied last
  // (a rescan), then the evidence is read once. The evidence is kept from call to call, so a
  // counter that rises or a heartbeat that stalls while the process runs is seen.
  NodeHealthView Read(const std::shared_ptr<const Inventory>& inventory);

 private:
  absl::StatusOr<NodeHealthView> AskAgent();
  NodeHealthView ReadOwn(const std::shared_ptr<const Inventory>& inventory, std::string_view why);

  const HealthSourceOptions options_;
  std::optional<uint64_t> generation_;   // of last_answer_
  NodeHealthView last_answer_;           // the agent's last document
  std::unique_ptr<HealthEvidence> own_;  // from the first own read on
  std::shared_ptr<const Inventory> applied_;
};

}  // namespace neuron::top
