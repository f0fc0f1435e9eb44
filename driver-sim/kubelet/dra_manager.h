#pragma once
// The kubelet's DRA side, for the emulator (not a public header):
//   - the plugin watcher (pkg/kubelet/pluginmanager): sockets in KUBELET_DIR/plugins_registry are
//     asked GetInfo, validated, registered and told NotifyRegistrationStatus; a socket that goes
//     away is deregistered. The kubelet watches with fsnotify and retries a failed registration
//     with back-off; we poll (Options::poll) and retry with the same back-off.
//   - the DRA plugin manager (pkg/kubelet/cm/dra/plugin): plugins keyed by driver name, the gRPC
//     service chosen from the plugin's supported_versions, the newest registration used;
//   - the health streams and cache of KEP-4680 (dra_health.h), read into the pods' status;
//   - the DRA manager (pkg/kubelet/cm/dra/manager.go): a claim cache keyed by claim UID with the
//     pods using each claim, NodePrepareResources for claims not prepared yet, batched per
//     driver (a claim with devices of two drivers is asked of both), NodeUnprepareResources once
//     no pod uses a claim; checkpointed to
//     KUBELET_DIR/dra_manager_state, where "prepared" is not kept, so a restarted kubelet prepares
//     the claims of running pods again.
// Error texts are the kubelet's (cited in dra_manager.cc).
//
// Thread-safe. Never holds its lock across an RPC; callers may hold locks of their own that it
// never takes.

#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "driver-sim/kubelet/kubelet_emulator.h"

namespace neuron::sim {

// One device of a prepared claim, as its driver's NodePrepareResources returned it.
struct PreparedDevice {
  std::string driver;
  std::vector<std::string> request_names;
  std::string pool;
  std::string device;
  std::vector<std::string> cdi_ids;
  bool operator==(const PreparedDevice&) const = default;
};

// The kubelet's ClaimInfo: the claim, the pods using it, and what each of its drivers prepared
// (its DriverState).
struct ClaimInfo {
  ClaimRef ref;
  std::set<std::string> pod_uids;
  // The drivers that prepared it (the claim is prepared once all of ref.drivers did). Not
  // checkpointed, as the kubelet's `prepared`.
  std::set<std::string> prepared_by = {};
  std::vector<PreparedDevice> devices = {};
};

class DraManager {
 public:
  struct Options {
    std::filesystem::path registry_dir;  // KUBELET_DIR/plugins_registry
    std::filesystem::path state_file;    // KUBELET_DIR/dra_manager_state
    std::chrono::milliseconds poll{100};
    std::optional<std::chrono::milliseconds> rpc_deadline;  // default: the kubelet's 45 s
    std::chrono::milliseconds health_timeout{30'000};       // DefaultHealthTimeout
  };

  DraManager(Options options, std::shared_ptr<spdlog::logger> log);
  ~DraManager();  // Stop()
  DraManager(const DraManager&) = delete;
  DraManager& operator=(const DraManager&) = delete;

  // (Re)starts as a kubelet does: reads the checkpoint (every claim unprepared), registers the
  // plugins whose sockets are in plugins_registry/ (one synchronous walk), starts the watcher,
  // then prepares again the claims that running pods use. A claim whose driver is not back is
  // logged and left unprepared.
  absl::Status Start();
  // Stops the watcher and forgets every plugin (a kubelet that stops); the claim cache stays.
  void Stop();

  // Before a pod's containers start: the pod uses `claims`; prepares those not prepared yet.
  // Errors: Unknown "prepare dynamic resources: ..." with the kubelet's text, naming the claim
  // and carrying the driver's error. Claims prepared before a failure stay prepared and used.
  absl::Status Prepare(const std::string& pod_uid, const std::vector<ClaimRef>& claims);
  // After the pod's containers stopped: the pod no longer uses `claims`; unprepares those no pod
  // uses. On an error the pod still uses every claim it did, so a retry does it all again.
  absl::Status Unprepare(const std::string& pod_uid, const std::vector<ClaimRef>& claims);
  // A pod that never started (its admission failed) releases its claims like a deleted one.

  // The cache's entries for `claims` (by UID), in their order; absent ones are left out.
  std::vector<ClaimInfo> Claims(const std::vector<ClaimRef>& claims) const;
  // UpdateAllocatedResourcesStatus for a container using `claims`: per claim with a prepared
  // device, "claim:<name>" and each device's health from the health streams (dra_health.h), one
  // entry per resource ID; a claim not in the cache or without devices is left out.
  std::vector<ResourceStatus> AllocatedResourcesStatus(const std::vector<ClaimRef>& claims) const;
  // Registered plugins: driver -> endpoints, newest last.
  std::map<std::string, std::vector<std::string>> Plugins() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace neuron::sim
