#pragma once
// What the plugin tells the kubelet: per resource the device list with health, combined from
// hardware health (NodeWatcher, docs/architecture.md#health) and the double-booking mask
// (docs/architecture.md#health, docs/kubelet-api.md#overlapping-resources): holdings learned from
// Allocate and from PodResources.
//
// Thread-safety: every method may be called from any thread. One mutex guards the hardware
// picture and the holdings; nothing slow runs under it (no file or network I/O: callers do their
// I/O first and hand in results), so Allocate never waits behind a slow path. Readers get an
// immutable NodeView (std::shared_ptr<const NodeView>) that stays valid while they hold it.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/discovery/inventory.h"
#include "core/model/allocator.h"
#include "core/model/device_id.h"
#include "core/model/topology.h"
#include "core/node/device_health.h"
#include "plugin/config.h"
#include "proto/pod_resources.h"

namespace neuron::plugin {

// The hardware picture NodeWatcher hands over after applying the health policy.
struct HardwareDevice {
  int index = -1;
  bool present = false;
  bool healthy = false;
  std::string reason;  // why unhealthy ("absent", "state INVALID", "uncorrected ECC", ...)
  std::optional<int> numa;
  // The DRA face's facts (plugin/dra/slice.h): "" when unknown; `unknown` when the device is
  // present but its state cannot be read (the device plugin counts that as unhealthy, the DRA
  // health service as UNKNOWN).
  std::string bdf;
  bool unknown = false;
  DeviceAttributes attributes;  // published as read (core/driver/device_attributes.h)
  DeviceHealth health;          // the whole verdict: state, components, every reason, degraded
  // The policy's strongest action over the classes that found a fault (plugin/config.h); `ignore`
  // while none did.
  Action action = Action::kIgnore;
  // Withheld from allocation while the active check or a reset holds its lock
  // (core/node/withhold.h): not healthy to the kubelet, whatever the evidence says.
  bool withheld = false;
  bool operator==(const HardwareDevice&) const = default;
};

struct HardwareEfa {
  std::string name;
  bool present = false;
  bool healthy = false;
  std::string reason;
  std::optional<int> numa;
  std::optional<int> uverbs;
  std::string bdf;  // "" when unknown
  DeviceHealth health;
  bool operator==(const HardwareEfa&) const = default;
};

// What the node is, as discovery read it. Each face takes what it publishes from here (the DRA
// slice's node attributes, an UltraServer claim's environment); the device plugin needs none.
struct NodeFacts {
  std::string instance_type;   // "trn1.32xlarge"; "" when unknown
  std::string driver_version;  // "2.29.0.0"; "" when unknown
  // The node's place in a Trn2 UltraServer (core/discovery/ultraserver.h); absent when unknown.
  std::optional<UltraServerInfo> ultraserver;
  bool operator==(const NodeFacts&) const = default;
};

struct Hardware {
  std::vector<HardwareDevice> devices;  // known device indices, ascending (absent ones too)
  std::vector<HardwareEfa> efas;        // known EFA interfaces, ascending name
  int cores_per_device = 0;             // logical cores per device at the LNC in force
  std::vector<std::vector<int>> links;  // NeuronLink neighbours per device index
  NodeFacts node;
  bool operator==(const Hardware&) const = default;
};

// One entry of a resource's ListAndWatch list.
struct ResourceDevice {
  std::string id;
  bool healthy = false;     // what the kubelet sees: hardware healthy and not masked
  bool hw_healthy = false;  // hardware health alone
  bool masked = false;      // held by an overlapping resource
  std::optional<int> numa;
  int device = -1;  // device index (neuron, neuroncore, neurondevice), -1 for EFA
  bool operator==(const ResourceDevice&) const = default;
};

struct ResourceView {
  Resource resource = Resource::kNeuron;
  std::vector<ResourceDevice> devices;             // ascending numeric id; EFA by name
  absl::flat_hash_map<std::string, size_t> index;  // id -> position in devices

  const ResourceDevice* Find(std::string_view id) const;
};

// An immutable picture of everything the RPC handlers need.
struct NodeView {
  uint64_t generation = 0;  // increases with every published view
  std::map<Resource, ResourceView> resources;
  std::shared_ptr<const Allocator> allocator;  // never null
  int cores_per_device = 0;
  std::map<std::string, HardwareEfa, std::less<>> efas;
  std::map<int, HardwareDevice> devices;
  NodeFacts node;  // Hardware's
  // Which resource holds each device index / core id (for error messages and metrics).
  std::map<int, Resource> device_holder;
  std::map<int, Resource> core_holder;

  const ResourceView& Get(Resource r) const { return resources.at(r); }
};

// The device indices `view`'s holdings name, whole or by a core.
std::set<int> HeldDevices(const NodeView& view);

class NodeState {
 public:
  using Listener = std::function<void(std::shared_ptr<const NodeView>)>;

  explicit NodeState(std::chrono::milliseconds allocation_grace);

  std::shared_ptr<const NodeView> view() const;

  // Listeners run on the thread that changed the state, after the lock is released, with the
  // new view. Views from racing changes may arrive out of order: compare generations.
  void AddListener(Listener listener);

  // From NodeWatcher after every reading of the evidence (each health poll, each event).
  // Publishes when anything changed; either way the evidence is as fresh as now.
  void SetHardware(Hardware hardware);
  // When the evidence was last read (SetHardware's wall-clock time); nullopt before the first.
  // A watcher that stalls stops moving it (the DRA health stream and the stale gauge use it).
  std::optional<std::chrono::system_clock::time_point> evidence_time() const;

  // From the PodResources cache: the kubelet's current holdings, taken at `when`.
  void SetPodAssignments(const PodAssignments& assignments,
                         std::chrono::steady_clock::time_point when);

  // Allocate: under the lock, runs `validate` on the current view (it returns the IDs to hold,
  // or an error that leaves everything unchanged), records the holding and publishes. Returns
  // the view the allocation was validated against.
  using Validator = std::function<absl::StatusOr<std::vector<std::string>>(const NodeView& view)>;
  absl::StatusOr<std::shared_ptr<const NodeView>> Commit(Resource resource,
                                                         const Validator& validate);

  // Allocate holdings not yet confirmed by PodResources. Only tests read it
  // (tests/fuzz/allocate_fuzz.cc, tests/plugin/plugin_test.cc): a refused Allocate records none,
  // and a PodResources answer that shows them, or one after the grace, ends them.
  size_t pending_allocations() const;

 private:
  struct Holding {
    std::vector<std::string> ids;
    std::chrono::steady_clock::time_point when;
  };

  // Rebuilds the view from hardware_ and holdings; returns it when it differs.
  std::shared_ptr<const NodeView> RebuildLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Notify(const std::shared_ptr<const NodeView>& view);

  const std::chrono::milliseconds grace_;
  mutable std::mutex mu_;
  Hardware hardware_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const Allocator> allocator_ ABSL_GUARDED_BY(mu_);
  std::map<Resource, std::vector<Holding>> pending_ ABSL_GUARDED_BY(mu_);
  std::map<Resource, std::set<std::string>> pod_ids_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const NodeView> view_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<std::chrono::system_clock::time_point> evidence_time_ ABSL_GUARDED_BY(mu_);
  std::vector<Listener> listeners_ ABSL_GUARDED_BY(mu_);
};

}  // namespace neuron::plugin
