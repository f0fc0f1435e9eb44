#pragma once
// The kubelet emulator: the kubelet's side of the device-plugin and PodResources APIs, behaving
// as docs/kubelet-api.md#kubelet-behaviour to #pod-resources says the real kubelet does, failure
// modes included, so the device plugin is tested against what a kubelet really does. It also plays
// the container runtime of docs/architecture.md#allocation, #device-numbering: device host paths
// are resolved under the simulated ROOT, and each container gets NEURON_ROOT and its device map
// (kDeviceMapEnv).
//
// Files under KUBELET_DIR, as on a node:
//   plugins_registry/                         watched for plugin registration sockets (DRA)
//   dra_manager_state                         the DRA claims the kubelet prepared (checkpoint)
//   device-plugins/kubelet.sock               Registration service
//   device-plugins/kubelet_internal_checkpoint the allocations, rewritten after every change
//   pod-resources/kubelet.sock                PodResources v1 (List, GetAllocatableResources, Get)
//   neuron-sim-kubelet.sock                   the emulator's own control service for `neuron-sim
//   pod`
//
// Thread-safe: every public method may be called from any thread.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace neuron::sim {

struct ContainerSpec {
  std::string name = "main";
  std::map<std::string, int> requests;  // resource name -> count (limits == requests)
  bool init = false;                    // init containers are admitted first; devices reused
  // Per resource, the only IDs the kubelet may choose for this container. No kubelet field does
  // this (a real pod gets such a set through a node of its own); tests use it to pin a pod to
  // devices they keep apart, e.g. the soak's quiet devices. Absent: any ID.
  std::map<std::string, std::set<std::string>> pinned = {};
};

// A ResourceClaim the pod references, as the kubelet learns it from the API server (which the
// emulator does not have: the caller names the claim and its driver). The kubelet prepares it on
// the driver before the pod's containers start and unprepares it once no pod uses it
// (dra_manager.h).
struct ClaimRef {
  std::string namespace_name;
  std::string name;
  std::string uid;
  // The drivers of its allocation's results, each asked to prepare its own devices (the kubelet
  // reads them from the claim's status; the emulator has no API server and is told).
  std::vector<std::string> drivers = {"neuron.aws.com"};
  bool operator==(const ClaimRef&) const = default;
};

struct PodSpec {
  std::string namespace_name = "default";
  std::string name;
  std::vector<ContainerSpec> containers;
  // Every app container uses every claim (the pod's resources.claims in each container; init
  // containers use none).
  std::vector<ClaimRef> claims = {};
  // Extended resources backed by DRA (KEP-5004, gate DRAExtendedResource): the ResourceClaim the
  // scheduler made for the containers' requests of `extended_resources`, which a DeviceClass's
  // extendedResourceName maps and no device plugin of the node serves
  // (pod.status.extendedResourceClaimStatus: its name, and the requests it maps). Those requests
  // are not allocated from a device plugin; the claim is prepared and used as a pod claim.
  std::optional<ClaimRef> extended_resource_claim = std::nullopt;
  std::set<std::string> extended_resources = {};
};

// Set by the container runtime in every container with a Neuron device spec: "C=H,..." pairs,
// ascending C, mapping the container's /dev/neuronC to host device H ("0=5,1=6" when the plugin
// renumbers for the container, "5=5,6=6" when it does not; docs/architecture.md#device-numbering).
// The simulated driver keys everything by host device, so it reads this to serve the container's
// view.
inline constexpr std::string_view kDeviceMapEnv = "NEURON_SIM_DEVICE_MAP";

// terminationGracePeriodSeconds' default in Kubernetes.
inline constexpr std::chrono::milliseconds kDefaultTerminationGracePeriod{30'000};

struct DeviceSpecOut {
  std::string container_path;
  std::string host_path;
  std::string permissions;
  bool operator==(const DeviceSpecOut&) const = default;
};

// One device of a container's claim in the pod's status (core/v1 ResourceHealth, KEP-4680).
struct ResourceHealth {
  std::string resource_id;  // the device's first CDI device ID, else "<driver>/<pool>/<device>"
  std::string health;       // "Healthy", "Unhealthy" or "Unknown"
  std::string message;      // the driver's, empty when it gave none
  bool operator==(const ResourceHealth&) const = default;
};

// containerStatuses[].allocatedResourcesStatus[] (core/v1 ResourceStatus): "claim:<claim name>"
// and the health of the claim's devices (driver-sim/README.md#kubelet-dra).
struct ResourceStatus {
  std::string name;
  std::vector<ResourceHealth> resources;
  bool operator==(const ResourceStatus&) const = default;
};

// What one container got: per resource the IDs, and the merged Allocate answers.
struct ContainerAllocation {
  std::string container;
  std::map<std::string, std::vector<std::string>> ids;  // resource -> device IDs
  // The plugins' envs, plus NEURON_ROOT (docs/architecture.md#allocation) and NEURON_SIM_DEVICE_MAP
  // (kDeviceMapEnv).
  std::map<std::string, std::string> envs;
  std::vector<DeviceSpecOut> devices;  // host paths as the plugin gave them
  // The device plugins' CDI names, then the CDI device IDs of the pod's prepared claims, whose
  // specs (Options::cdi_dir) were applied to envs and devices.
  std::vector<std::string> cdi_devices;
  std::map<std::string, std::string> annotations;
  // The health of the devices of the pod's claims, as the kubelet puts it in the container's
  // status when the pod's status is built (here: whenever the pod is read). Empty without claims.
  std::vector<ResourceStatus> allocated_resources_status;
};

struct AdmittedPod {
  std::string namespace_name;
  std::string name;
  std::string uid;
  std::vector<ContainerAllocation> containers;
};

// One extended resource as the kubelet accounts it (docs/kubelet-api.md#list-and-watch to
// #kubelet-restart).
struct ResourceState {
  std::string name;
  std::string endpoint;    // socket file name, "" when never registered
  bool connected = false;  // a ListAndWatch stream is open
  int capacity = 0;        // healthy + unhealthy (0 after a restart until re-registered)
  int allocatable = 0;     // healthy; 0 while disconnected
  int in_use = 0;          // IDs held by admitted pods
  std::map<std::string, bool> devices;  // id -> healthy, from the last ListAndWatch message
  std::map<std::string, std::vector<int64_t>> numa;  // id -> NUMA nodes of its TopologyInfo
  uint64_t updates = 0;                              // ListAndWatch messages received
  bool get_preferred_allocation = false;             // from GetDevicePluginOptions
  bool pre_start_required = false;                   // from GetDevicePluginOptions
};

class KubeletEmulator {
 public:
  struct Options {
    std::string kubelet_dir;  // holds device-plugins/ and pod-resources/
    std::string root = "/";   // the simulated node's root, for the container-runtime role
    std::chrono::milliseconds dial_timeout{10'000};   // Register's dial-back (DM client.go)
    std::chrono::milliseconds grace_period{300'000};  // endpointStopGracePeriod (DM types.go)
    // false models a kubelet that never asks the plugin (for comparisons): then the kubelet's
    // own choice is taken.
    bool use_preferred_allocation = true;
    // Deadline of GetDevicePluginOptions, GetPreferredAllocation and Allocate. The kubelet sets
    // none (a hung plugin stalls admission, docs/kubelet-api.md#allocate,
    // #get-preferred-allocation), so neither do we by default; tests set one so that they cannot
    // hang.
    std::optional<std::chrono::milliseconds> rpc_deadline{};
    // Seeds the order in which the kubelet's own choice takes devices. The kubelet iterates Go
    // sets, whose order is random; 0 seeds from std::random_device.
    uint64_t seed = 0;
    // Where the container runtime reads CDI spec files (*.json) for the claims' CDI device IDs.
    std::string cdi_dir = "/var/run/cdi";
    // How often the plugin watcher looks at plugins_registry/ (the kubelet uses fsnotify).
    std::chrono::milliseconds plugin_poll{100};
    // After this without a report, a DRA device whose plugin set no health_check_timeout_seconds
    // reads as Unknown (the kubelet's DefaultHealthTimeout, pkg/kubelet/cm/dra/healthinfo.go).
    std::chrono::milliseconds dra_health_timeout{30'000};
  };

  // Creates the directories, deletes every socket in device-plugins/ (CleanupPluginDirectory),
  // reads the checkpoint, and serves Registration, PodResources and the control service.
  static absl::StatusOr<std::unique_ptr<KubeletEmulator>> Start(Options options);
  ~KubeletEmulator();  // stops serving and removes the sockets it created

  // A kubelet restart (docs/kubelet-api.md#kubelet-restart): servers stop, every socket in
  // device-plugins/ is deleted, the checkpoint is read back (resources at capacity 0 until their
  // plugin re-registers), admitted pods keep their devices, and kubelet.sock is created again.
  absl::Status Restart();

  // Admission (docs/kubelet-api.md#allocate, #get-preferred-allocation): per container (init
  // containers first), per resource: available = healthy and not in use; GetPreferredAllocation
  // when the plugin offers it; the answer is completed or corrected as the kubelet does; then
  // Allocate. Errors are the kubelet's: FailedPrecondition "Insufficient <resource>" / "no healthy
  // devices present..." and Unknown "UnexpectedAdmissionError: ..." carrying the plugin's message;
  // the container runtime's FailedPrecondition "CreateContainerError: ..." when a device node is
  // missing under ROOT. A pod with claims then has them prepared by their DRA drivers and the CDI
  // specs of their devices applied (driver-sim/README.md#kubelet-dra): Unknown
  // "FailedPrepareDynamicResources: ..." carrying the driver's per-claim error, Unavailable for
  // a driver not registered, FailedPrecondition "CreateContainerError: failed to inject CDI
  // devices: unresolvable CDI devices ..." for an ID without a spec. A failed admission holds
  // nothing and releases its claims.
  absl::StatusOr<AdmittedPod> AdmitPod(const PodSpec& pod);
  // The container runtime's part: the process group that runs the pod's containers (`neuron-sim
  // pod run` starts its command in a group of its own and says which). Deleting the pod stops it.
  // NotFound for an unknown pod.
  absl::Status SetPodProcessGroup(std::string_view namespace_name, std::string_view name, int pgid);
  // Stops the pod as the kubelet stops containers: SIGTERM to its process group, SIGKILL when
  // some of it outlives `grace_period`, and only once no process of the group is left are the
  // pod's devices freed (the plugin is not told; it learns through PodResources). Returns after
  // that; DeadlineExceeded, keeping the pod, when the group survives SIGKILL for seconds (a
  // member unreaped by its parent).
  absl::Status DeletePod(std::string_view namespace_name, std::string_view name,
                         std::chrono::milliseconds grace_period = kDefaultTerminationGracePeriod);

  std::vector<AdmittedPod> Pods() const;
  std::optional<ResourceState> Resource(std::string_view name) const;
  std::vector<ResourceState> Resources() const;
  uint64_t registrations() const;   // successful Register calls since Start
  uint64_t register_calls() const;  // every Register call, as the kubelet counts them
  // PodResources List calls, as the kubelet counts them
  // (kubelet_pod_resources_endpoint_requests_list).
  uint64_t pod_resources_lists() const;
  uint64_t restarts() const;
  // DRA plugins registered through plugins_registry/: driver name -> endpoint, newest last.
  std::map<std::string, std::vector<std::string>> DraPlugins() const;
  const Options& options() const;

  class Impl;  // internal (emulator_impl.h); public only so the implementation files can name it

 private:
  explicit KubeletEmulator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace neuron::sim
