#pragma once
// The Node's NeuronHealth condition, as AWS's node-problem-detector (NPD) sets it, so that AWS's
// node-recovery acts on ours unchanged (docs/driver-interface.md#hardware-errors,
// plugin/kubeapi/README.md#node-condition): type NeuronHealth, status True with reason
// NeuronHasError_<TYPE> while a device has a permanent hardware error, False with reason
// NeuronHasNoError otherwise. The privileged plugin decides it (its `GET /health` on its socket:
// {"generation", "evidence_time", "devices", "efas", "node_condition": {status, reason,
// message}}); this only writes it:
//   - the plugin is asked every `poll` with the generation last read (`?unless=N`: 304 while
//     nothing changed), and without it at every resync and while the evidence it last gave is
//     half-way to stale (its evidence_time moves without a new generation);
//   - when the condition differs from the Node's (status, reason or message), the Node's status
//     is patched (strategic merge of that one condition, with the resourceVersion read):
//     lastTransitionTime only when the status changes, lastHeartbeatTime now; unchanged, the
//     heartbeat is refreshed every `heartbeat`;
//   - the plugin unreachable, or its evidence older than `stale`, for longer than `stale`:
//     status Unknown, reason NeuronHealthUnknown, rather than a False nobody vouches for
//     (unknown is not healthy); right after start, nothing is written until the plugin has
//     answered with evidence or `stale` has passed;
//   - each transition (status or reason) creates an Event on the Node in `event_namespace`
//     (involvedObject the Node with its uid, reason the condition's, type Warning for True,
//     Normal otherwise, source neuron-dra-api on the node) and logs a line on `dra-api.condition`;
//   - the API server failing: exponential back-off with jitter up to `backoff_max`;
//   - written by someone else (NPD): a reason we never write, a lastHeartbeatTime written since
//     this writer started that it did not write, or, once it has written, any change of the
//     condition it did not make. It then stands down: writes nothing, logs once at warn naming
//     why, and reads the Node again at each resync; it takes the condition back once it carries
//     a reason of ours and nobody has refreshed it for two heartbeat periods (its writer gone).
// The Node is read (GET) only at a resync, before a write, and for a heartbeat: not at each poll.
//
// Thread-safety: SyncOnce from one thread at a time (the loop's, or a test's); Start and Stop from
// one thread; stats() and condition() from any.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/node/device_health.h"
#include "nlohmann/json.hpp"
#include "plugin/kubeapi/client.h"
#include "plugin/kubeapi/round_loop.h"

namespace spdlog {
class logger;
}

namespace neuron::kubeapi {

// Whether neuron-dra-api writes `reason`: NeuronHasNoError, NeuronHasError_<TYPE> (TYPE upper
// case, digits and '_'), NeuronHealthUnknown.
bool IsOurReason(std::string_view reason);

struct NodeCondition {
  std::string status;  // True, False or Unknown
  std::string reason;
  std::string message;
  bool operator==(const NodeCondition&) const = default;
};

// What the health policy does to one device as /health says it (plugin/remediation.h): its
// `action` and, once a reset was tried, the reset's `phase` and `message`. Each change is an Event.
struct DeviceRemediation {
  std::string action;  // "ignore", "taint", "evict", "reset", "node"
  std::string reason;  // the deciding one of the device's reasons ("" when healthy)
  std::string phase;   // "" before a reset was tried; "refused", "failed", "returned", ...
  int tries = 0;       // the reset's failed tries
  std::string message;
  bool operator==(const DeviceRemediation&) const = default;
};

// What is read of the plugin's `GET /health`: `generation`, `evidence_time` (RFC 3339; absent
// before the plugin's first reading), `node_condition` {status, reason, message} and each
// device's remediation.
struct HealthDocument {
  uint64_t generation = 0;
  std::optional<std::chrono::system_clock::time_point> evidence_time;
  NodeCondition condition;
  std::map<int, DeviceRemediation> remediations;
};

// The Event of a device's remediation moving from `before` to `after`: {reason, message, type};
// nullopt when nothing an operator acts on changed (the action back to ignore with no reset).
struct RemediationEvent {
  std::string reason;  // "NeuronDeviceTaint", "NeuronDeviceResetFailed", ...
  std::string message;
  std::string type;  // "Warning" or "Normal"
};
std::optional<RemediationEvent> EventOfRemediation(int device, const DeviceRemediation& before,
                                                   const DeviceRemediation& after);
// DataLoss naming what is missing or malformed: a status other than True/False/Unknown, or a
// reason that does not fit it (True: NeuronHasError_<TYPE>; False: NeuronHasNoError).
absl::StatusOr<HealthDocument> ParseHealthDocument(std::string_view body);

struct ConditionOptions {
  std::string plugin_address = "unix:/run/neuron-node-agent/plugin.sock";
  std::string node_name;
  std::chrono::milliseconds poll{250};             // how often the plugin is asked
  std::chrono::milliseconds plugin_timeout{2000};  // each ask
  std::chrono::milliseconds backoff_initial{500};  // first wait after an API failure
  std::chrono::milliseconds backoff_max{30000};    // the cap
  std::chrono::milliseconds resync{60000};         // the Node read again at least this often
  std::chrono::milliseconds heartbeat{300000};     // lastHeartbeatTime refreshed this often
  std::chrono::milliseconds stale{60000};          // past it, no answer or old evidence: Unknown
  std::string event_namespace = "default";         // where the kubelet puts a Node's Events
  // The wall clock, for the condition's times, the evidence's age and every period above: a
  // test moves them all with a fake one.
  std::function<std::chrono::system_clock::time_point()> now = [] {
    return std::chrono::system_clock::now();
  };
};

class ConditionWriter {
 public:
  ConditionWriter(const Client& client, ConditionOptions options);
  ~ConditionWriter();  // Stop()
  ConditionWriter(const ConditionWriter&) = delete;
  ConditionWriter& operator=(const ConditionWriter&) = delete;

  // One round. OK when the Node holds what it should (or nothing is to be written yet, or it
  // stands down); the API's error otherwise.
  absl::Status SyncOnce();

  // A thread running SyncOnce every `poll`, or after the back-off while the API fails.
  void Start();
  void Stop();

  struct Stats {
    uint64_t patches = 0;  // writes of the condition (transitions and heartbeats)
    uint64_t events = 0;   // Events created
    bool stood_down = false;
  };
  Stats stats() const;
  // The condition the Node holds as this writer last wrote or found it (nullopt before).
  std::optional<NodeCondition> condition() const;

 private:
  using Time = std::chrono::system_clock::time_point;
  // The Node's condition as this writer wrote it (or took it over): what a write by another
  // writer would change.
  struct Ours {
    NodeCondition condition;
    std::string heartbeat;  // lastHeartbeatTime as written
    Time heartbeat_time;
  };

  // Asks the plugin (with `?unless=` unless `full`); remembers the document and when it answered.
  void ReadPlugin(Time now, bool full);
  // What the Node should say now; nullopt while there is nothing to say yet (just started).
  std::optional<NodeCondition> Desired(Time now) const;
  // Whether `current` (the Node's condition; null when absent) was written by someone else;
  // `why` says how it shows.
  bool Foreign(const nlohmann::json* current, std::string* why) const;
  // Writes `desired` over `current` (null when absent) with the Node's resourceVersion `rv`.
  absl::Status Write(const NodeCondition& desired, const nlohmann::json* current,
                     const std::string& rv, Time now);
  // The Event of a transition to `c` (failures logged, not returned: the condition is written).
  void Record(const NodeCondition& c, Time now);
  // An Event on the Node (failures logged).
  void Post(std::string_view reason, std::string_view message, std::string_view type, Time now);
  // The Events of the devices' remediations that changed since the last document.
  void RecordRemediations(const HealthDocument& d, Time now);
  // Reads the Node and writes what differs, unless another writer keeps the condition.
  absl::Status Reconcile(const NodeCondition& desired, Time now);
  absl::Status Sync();
  void StandDown(const std::string& why);
  void Report(const absl::Status& s);

  const Client& client_;
  const ConditionOptions options_;
  const std::shared_ptr<spdlog::logger> log_;
  const Time started_;

  // SyncOnce's own.
  std::optional<HealthDocument> document_;
  std::optional<std::map<int, DeviceRemediation>> remediations_;  // as last recorded
  Time last_contact_{};       // the plugin's last answer (200 or 304)
  std::string plugin_error_;  // why the plugin's last ask failed ("" when it answered)
  std::optional<Ours> ours_;
  Time last_node_read_{};
  std::string node_uid_;
  bool api_down_ = false;
  std::string api_error_;  // the last round's error ("" when it succeeded)
  bool plugin_down_ = false;

  mutable std::mutex mu_;
  Stats stats_;
  std::optional<NodeCondition> condition_;
  Pacing pacing_{options_.poll, options_.backoff_initial, options_.backoff_max};
  RoundLoop loop_;  // last: stopped before the rest goes
};

}  // namespace neuron::kubeapi
