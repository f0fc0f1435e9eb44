#pragma once
// The health policy's `reset` action (docs/OPERATIONS.md#remediation): a device that is Unhealthy
// by a class whose action is `reset` is reset through sysfs and returned only once the active
// check (docs/OPERATIONS.md#active-check) passes on it.
//
// One try, in order, each step able to refuse or fail it:
//   1. the device is in no pod's allocation or prepared claim (refused: wait for it to end);
//   2. its withhold lock is taken exclusively (core/node/withhold.h): from here the plugin commits
//      no allocation of it and reports it Unhealthy; the allocation is asked again, so one
//      committed just before the lock is seen;
//   3. no process holds it open, after up to `release_wait` for the agent's own holds to go (the
//      exporter lets go of a device once no runtime holds it): the driver ignores a reset while
//      the device is open (refused, naming the holders);
//   4. the reset is written, and confirmed: reset_req_count rose and the state came back READY
//      within `reset_timeout` (failed otherwise: ignored, or INVALID);
//   5. the active check runs on the device as a child process (failed unless it exits 0).
// Refusals are not tries: the device waits, tainted, until they clear. After `tries` failed
// tries the device stays withheld (and so Unhealthy and tainted) until the plugin restarts, and
// the log, the metric and /health say so. The lock is held from the first try until the device
// passes: the reset clears its evidence, and only the check may return it.
//
// Thread-safety: Start/Stop belong to one owner; Status may be called from any thread. One
// remediation runs at a time, on the remediator's own thread.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "plugin/config.h"
#include "plugin/node_state.h"

namespace neuron::plugin {

class Metrics;

// The phase of a device whose resets are exhausted: withheld until the plugin restarts, and the
// Node condition says so (plugin/health_api.h).
inline constexpr std::string_view kPhaseGaveUp = "gave_up";

// Where a device's remediation stands, for GET /health and the log.
struct RemediationStatus {
  std::string phase;    // "refused", "resetting", "checking", "failed", "returned", "gave_up"
  int tries = 0;        // failed tries so far
  std::string message;  // the last outcome in words
  bool operator==(const RemediationStatus&) const = default;
};

struct RemediationOptions {
  std::string root = "/";
  HealthPolicy policy;  // reset_tries, check_command, check_programs, state_dir
  std::chrono::milliseconds release_wait{5000};
  std::chrono::milliseconds reset_timeout{10000};
  std::chrono::milliseconds check_timeout{30000};
  std::chrono::milliseconds retry_after{2000};  // between failed tries, doubling
};

// The devices in some pod's allocation or prepared claim (the face's knowledge).
using InUseFn = std::function<std::set<int>()>;

class Remediator {
 public:
  Remediator(RemediationOptions options, NodeState* state, InUseFn in_use, Metrics* metrics);
  ~Remediator();  // Stop()s
  Remediator(const Remediator&) = delete;
  Remediator& operator=(const Remediator&) = delete;

  void Start();
  void Stop();

  std::map<int, RemediationStatus> Status() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// The command line of the active check on one device, as the reset runs it.
std::vector<std::string> CheckCommand(const RemediationOptions& options, int device);

}  // namespace neuron::plugin
