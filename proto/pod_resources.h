#pragma once
// Who holds which device IDs, from the kubelet's PodResources API
// (docs/kubelet-api.md#pod-resources), and a cache that refreshes it off every caller's path.
//
// The plugin learns releases from it (the kubelet has no Deallocate), the exporter and the tools
// attribute devices and cores to pods with it. A slow or absent kubelet must never slow those
// callers, so they read the cache's latest answer and never call the kubelet themselves.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace v1 {
class ListPodResourcesResponse;  // podresources/v1/api.pb.h
}  // namespace v1

namespace neuron {

// The DRA side of an assignment: one device of a ResourceClaim, as PodResources' ClaimResource
// names it (docs/kubelet-api.md#pod-resources).
struct DraClaimDevice {
  std::string claim_namespace;
  std::string claim_name;
  std::string driver;  // "neuron.aws.com"
  std::string pool;    // our driver's and AWS's: the node name
  std::string device;  // as the driver published it: "neuron-3", "neurondevice3", ...
  std::vector<std::string> cdi_devices;
  bool operator==(const DraClaimDevice&) const = default;
};

// One container's IDs of one resource. A device-plugin grant lists the plugin's IDs of an extended
// resource. A DRA claim device gets one assignment of its own with `claim` set: when
// MapDraDevice places its name, `resource` and `ids` are the device-plugin resource and ID that
// name the same hardware (so Holder and every consumer of device indices treat both alike);
// otherwise `resource` is the driver's name and `ids` the device name as reported. Our UltraServer
// device `neuron-node` holds every Neuron device of the node, which PodResources does not list:
// it gets `whole_node`, `resource` aws.amazon.com/neuron and no IDs, and Holder answers it for
// every device and core.
struct PodDeviceAssignment {
  std::string pod_namespace;
  std::string pod_name;
  std::string container;
  std::string resource;  // "aws.amazon.com/neuroncore"
  std::vector<std::string> ids;
  std::optional<DraClaimDevice> claim{};
  bool whole_node = false;
  bool operator==(const PodDeviceAssignment&) const = default;
};

// The Neuron DRA driver's name, ours and AWS's (docs/kubelet-api.md#dra).
inline constexpr std::string_view kDraDriverNeuron = "neuron.aws.com";
// Our EFA interfaces' DRA driver (plugin/dra/device_kinds.h: not AWS's efa.networking.k8s.aws).
inline constexpr std::string_view kDraDriverEfa = "efa.neuron.aws.com";

// A DRA device name of `driver` as the device-plugin resource and ID of the same hardware, where
// the name encodes it: ours `neuron-<index>`, `neuroncore-<global core id>`, `efa-<name>` (of
// efa.neuron.aws.com, and of neuron.aws.com for claims prepared before EFA had a driver of its
// own), and `neuron-node` (every device of the node: `whole_node`, no ID)
// (docs/metrics.md#dra-attribution),
// AWS's `neurondevice<index>` (SDK deploy/eks/dra.rst, Example 1). nullopt for another driver, or
// a name that encodes no index (AWS's UltraServer `neuron_node` devices, whose names are not
// published): those are shown as reported. Indices are checked only for form here; whether the
// node has the device is the consumer's check, as for device-plugin IDs.
struct PlacedDraDevice {
  std::string resource;
  std::string id;
  bool whole_node = false;
  bool operator==(const PlacedDraDevice&) const = default;
};
std::optional<PlacedDraDevice> MapDraDevice(std::string_view driver, std::string_view device);

// An immutable answer of List, indexed by (resource, id). Thread-safe (const).
class PodAssignments {
 public:
  PodAssignments() = default;
  explicit PodAssignments(std::vector<PodDeviceAssignment> assignments);

  const std::vector<PodDeviceAssignment>& all() const { return assignments_; }
  // The assignment holding `id` of `resource`, or nullptr. If the kubelet listed an ID twice
  // (it should not), the first holder wins. A device or core no assignment lists is held by the
  // first whole-node assignment, if any.
  const PodDeviceAssignment* Holder(std::string_view resource, std::string_view id) const;

 private:
  std::vector<PodDeviceAssignment> assignments_;
  absl::flat_hash_map<std::pair<std::string, std::string>, size_t> index_;
  std::optional<size_t> whole_node_;
};

// The assignments of one List answer (what ListPodResources returns), for callers that hold the
// message itself.
PodAssignments AssignmentsFromList(const v1::ListPodResourcesResponse& response);

// One List call on the PodResources socket (a path, e.g. KUBELET_DIR/pod-resources/kubelet.sock)
// with a deadline. Unavailable when nothing listens there, DeadlineExceeded on a slow kubelet.
// Containers with no devices are left out. DynamicResource entries become one assignment per
// claim device (PodDeviceAssignment).
absl::StatusOr<PodAssignments> ListPodResources(const std::string& socket_path,
                                                std::chrono::milliseconds timeout);

// Refreshes PodAssignments every `period` on its own thread. Readers get the latest successful
// answer (empty before the first) without waiting. After a failure the channel is dropped and
// re-created, because a restarted kubelet makes a new socket file that an old channel would only
// find after gRPC's reconnect backoff. Thread-safe.
class PodResourcesCache {
 public:
  // Called on the refresh thread after every successful refresh with the latest answer and
  // whether it differs from the previous one (the first success counts as a change). It returns
  // how long to wait for the next refresh: a caller that knows nothing can have changed (the
  // plugin, while nothing it advertises is held) waits longer.
  using OnAnswer =
      std::function<std::chrono::milliseconds(std::shared_ptr<const PodAssignments>, bool changed)>;
  struct Options {
    std::string socket_path;
    // The wait after a failed refresh, and after every successful one without `on_answer`.
    std::chrono::milliseconds period{1000};
    std::chrono::milliseconds timeout{500};
    OnAnswer on_answer{};
  };

  explicit PodResourcesCache(Options options);
  ~PodResourcesCache();  // stops and joins the refresh thread
  PodResourcesCache(const PodResourcesCache&) = delete;
  PodResourcesCache& operator=(const PodResourcesCache&) = delete;

  std::shared_ptr<const PodAssignments> Latest() const;
  // The outcome of the most recent refresh; Unavailable until the first one ran.
  absl::Status LastStatus() const;
  // Successful and failed refreshes so far (self-metrics).
  uint64_t refreshes() const;
  uint64_t failures() const;
  // Wakes the refresh thread now instead of at the end of its wait.
  void RefreshSoon();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace neuron
