#pragma once
// Internals of KubeletEmulator, shared by its .cc files (not a public header).
//
// Locking: `mu` guards resources, pods and the counters. It is never held across an RPC to a
// plugin: Register dials and asks for options without it, admission releases it around
// GetPreferredAllocation and Allocate as the kubelet does (DM
// callGetPreferredAllocationIfAvailable, allocateContainerResources). `admit_mu` admits one pod at
// a time (the kubelet admits pods serially on its sync loop). `lifecycle_mu` orders Restart against
// the destructor.

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "driver-sim/kubelet/dra_cdi.h"
#include "driver-sim/kubelet/dra_manager.h"
#include "driver-sim/kubelet/kubelet_emulator.h"

namespace neuron::sim {

using SteadyTime = std::chrono::steady_clock::time_point;

// The kubelet's view of one device: its health and NUMA nodes from the last ListAndWatch message.
struct KnownDevice {
  bool healthy = false;
  std::vector<int64_t> numa;
};

// The kubelet's client of one plugin endpoint (DM client.go): the channel from the dial-back and
// a thread that consumes ListAndWatch until the stream ends or Stop cancels it.
class PluginClient {
 public:
  PluginClient(std::string resource, uint64_t generation, std::shared_ptr<grpc::Channel> channel,
               KubeletEmulator::Impl* owner);
  ~PluginClient();  // Stop()
  void Start();
  void Stop();  // cancels the stream and joins the thread; idempotent
  v1beta1::DevicePlugin::Stub& stub() { return *stub_; }

 private:
  void Run();
  const std::string resource_;
  const uint64_t generation_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1beta1::DevicePlugin::Stub> stub_;
  KubeletEmulator::Impl* owner_;
  grpc::ClientContext context_;
  std::thread thread_;
  std::mutex stop_mu_;
  bool stopped_ = false;
};

// One resource as the device manager keeps it: endpointInfo plus healthy/unhealthy/all devices.
struct Endpoint {
  std::string endpoint;  // socket file name; "" when restored from the checkpoint
  std::map<std::string, KnownDevice> devices;
  bool connected = false;               // the ListAndWatch stream is open
  std::optional<SteadyTime> stop_time;  // set while stopped (disconnected or restored)
  v1beta1::DevicePluginOptions options;
  uint64_t updates = 0;
  uint64_t generation = 0;  // which PluginClient owns this endpoint
  std::shared_ptr<PluginClient> client;
};

// The NUMA nodes of device `id` of `resource` as its plugin last listed them; empty when the
// resource, the device or its topology is unknown.
inline std::vector<int64_t> NumaNodesOf(const std::map<std::string, Endpoint>& resources,
                                        const std::string& resource, const std::string& id) {
  auto ep = resources.find(resource);
  if (ep == resources.end()) return {};
  auto d = ep->second.devices.find(id);
  return d == ep->second.devices.end() ? std::vector<int64_t>{} : d->second.numa;
}

struct ContainerRecord {
  std::string name;
  bool init = false;
  std::map<std::string, std::vector<std::string>> ids;  // resource -> IDs, allocation order
  std::map<std::string, v1beta1::ContainerAllocateResponse> responses;  // resource -> answer
  // The CDI device IDs of the pod's claims (app containers only) and their specs' edits, applied
  // by the runtime when the container was created.
  std::vector<std::string> cdi_ids;
  CdiEdits cdi;
};

struct PodRecord {
  std::string namespace_name;
  std::string name;
  std::string uid;
  std::vector<ContainerRecord> containers;
  // The process group running the containers, 0 when none was given (a pod admitted without a
  // command). Not checkpointed: the runtime's, not the device manager's; kept across Restart.
  int pgid = 0;
  std::vector<ClaimRef> claims;  // the pod's resource claims (DraManager prepares them)
};

// SIGTERM to process group `pgid`, SIGKILL after `grace_period`, and returns once no process of
// the group is left (an unreaped zombie counts: its parent must reap it). DeadlineExceeded when
// some remain seconds after SIGKILL.
absl::Status StopProcessGroup(int pgid, std::chrono::milliseconds grace_period,
                              spdlog::logger& log);

class KubeletEmulator::Impl {
 public:
  explicit Impl(Options o);

  // kubelet_emulator.cc
  absl::Status StartServing();  // registration + pod resources; caller holds lifecycle_mu
  void StopServing();           // the same two servers and every plugin client
  absl::Status RestartLocked();
  void ExpireLocked();  // endpointStopGracePeriod, evaluated lazily as GetCapacity does
  ResourceState StateLocked(const std::string& name, const Endpoint& ep) const;
  std::map<std::string, int> InUseLocked() const;  // resource -> IDs held by admitted pods

  // registration.cc
  grpc::Status Register(const v1beta1::RegisterRequest& request);
  void OnListAndWatch(const std::string& resource, uint64_t generation,
                      const v1beta1::ListAndWatchResponse& response);
  void OnStreamEnd(const std::string& resource, uint64_t generation, const grpc::Status& status);
  std::unique_ptr<grpc::Service> MakeRegistrationService();

  // admission.cc
  absl::StatusOr<AdmittedPod> Admit(const PodSpec& pod);
  absl::Status Delete(std::string_view namespace_name, std::string_view name,
                      std::chrono::milliseconds grace_period);
  absl::Status SetProcessGroup(std::string_view namespace_name, std::string_view name, int pgid);
  AdmittedPod ToAdmitted(const PodRecord& pod) const;
  // DM devicesToAllocate for one (container, resource); takes `lock` (on mu) and releases it
  // around GetPreferredAllocation.
  absl::StatusOr<std::vector<std::string>> DevicesToAllocate(std::unique_lock<std::mutex>& lock,
                                                             const std::string& resource,
                                                             int required,
                                                             const std::set<std::string>& reusable,
                                                             const std::set<std::string>* pinned);
  // Steps of DevicesToAllocate (mu held): the resource's healthy IDs (errors for an unknown
  // resource or none healthy); those of them no pod or the admission in progress holds; the
  // plugin's preference among them (empty when it offers none), released around the RPC.
  absl::StatusOr<std::vector<std::string>> HealthyLocked(const std::string& resource) const;
  std::vector<std::string> AvailableLocked(const std::string& resource,
                                           const std::vector<std::string>& healthy) const;
  absl::StatusOr<std::vector<std::string>> PreferredLocked(
      std::unique_lock<std::mutex>& lock, const std::string& resource,
      const std::vector<std::string>& available, const std::vector<std::string>& allocated,
      int required);
  // Steps of Admit: the spec's own checks; one container's devices and Allocate call per resource
  // (mu held, released around the RPC), updating the pod's reusable devices; the container
  // runtime's check that every device node exists under ROOT.
  static absl::Status CheckPodSpec(const PodSpec& spec);
  absl::StatusOr<ContainerRecord> AllocateContainerLocked(
      std::unique_lock<std::mutex>& lock, const ContainerSpec& c,
      std::map<std::string, std::set<std::string>>& reuse);
  absl::Status CheckDeviceNodes(const AdmittedPod& admitted) const;
  // Steps of Admit for a pod with claims (mu held, released around the RPCs): NodePrepareResources
  // through the DRA manager, then the runtime's CDI injection into every app container. On an
  // error the pod's claims are released again (a pod that never starts is deleted).
  absl::Status PrepareClaimsLocked(std::unique_lock<std::mutex>& lock, PodRecord& pod);

  // checkpoint.cc
  absl::Status WriteCheckpointLocked();
  absl::Status ReadCheckpointLocked();  // replaces resources (stopped, capacity 0) and pods

  // services.cc
  std::unique_ptr<grpc::Service> MakePodResourcesService();
  std::unique_ptr<grpc::Service> MakeControlService(KubeletEmulator* owner);

  void SetDeadline(grpc::ClientContext& context) const;

  const Options options;
  const std::filesystem::path plugin_dir;  // KUBELET_DIR/device-plugins
  const std::filesystem::path registration_socket;
  const std::filesystem::path checkpoint_file;
  const std::filesystem::path podresources_socket;
  const std::filesystem::path control_socket;
  std::shared_ptr<spdlog::logger> log;
  std::unique_ptr<DraManager> dra;  // plugins_registry/ and claims; its own lock

  mutable std::mutex mu;
  std::map<std::string, Endpoint> resources;  // guarded by mu
  std::vector<PodRecord> pods;                // guarded by mu
  // IDs taken by the admission in progress: in use, not yet a pod (the kubelet's
  // allocatedDevices before podDevices.insert).
  std::map<std::string, std::set<std::string>> admitting;  // guarded by mu
  uint64_t registrations = 0;                              // guarded by mu
  uint64_t register_calls = 0;                             // guarded by mu
  uint64_t pod_resources_lists = 0;                        // guarded by mu
  uint64_t restarts = 0;                                   // guarded by mu
  uint64_t next_generation = 1;                            // guarded by mu
  std::mt19937_64 rng;                                     // guarded by mu

  std::mutex admit_mu;
  std::mutex lifecycle_mu;
  bool serving = false;  // guarded by lifecycle_mu

  std::unique_ptr<grpc::Service> registration_service;
  std::unique_ptr<grpc::Server> registration_server;
  std::unique_ptr<grpc::Service> podresources_service;
  std::unique_ptr<grpc::Server> podresources_server;
  std::unique_ptr<grpc::Service> control_service;
  std::unique_ptr<grpc::Server> control_server;
};

// The kubelet's IsExtendedResourceName (k8s.io/kubernetes pkg/apis/core/v1/helper): a
// domain-prefixed name outside kubernetes.io/ that is a valid qualified name.
bool IsExtendedResourceName(std::string_view name);

// Deletes every socket in `dir`, keeping other files (DM manager.go CleanupPluginDirectory).
void CleanupPluginDirectory(const std::filesystem::path& dir, spdlog::logger& log);

// Serves `service` on a Unix socket; the socket file is removed first if stale.
absl::StatusOr<std::unique_ptr<grpc::Server>> ServeUnix(const std::filesystem::path& socket,
                                                        grpc::Service* service);

}  // namespace neuron::sim
