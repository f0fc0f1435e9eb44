// KubeletEmulator: start, restart and stop, and the read-only accessors. Registration and
// ListAndWatch are in registration.cc, admission in admission.cc, the checkpoint in
// checkpoint.cc, the PodResources and control services in services.cc.
#include "driver-sim/kubelet/kubelet_emulator.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <set>
#include <system_error>

#include "core/base/component_log.h"
#include "driver-sim/kubelet/emulator_impl.h"

namespace neuron::sim {

namespace fs = std::filesystem;

namespace {

uint64_t Seed(uint64_t seed) {
  if (seed != 0) return seed;
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

}  // namespace

KubeletEmulator::Impl::Impl(Options o)
    : options(std::move(o)),
      plugin_dir(fs::path(options.kubelet_dir) / "device-plugins"),
      registration_socket(plugin_dir / "kubelet.sock"),
      checkpoint_file(plugin_dir / "kubelet_internal_checkpoint"),
      podresources_socket(fs::path(options.kubelet_dir) / "pod-resources" / "kubelet.sock"),
      control_socket(fs::path(options.kubelet_dir) / "neuron-sim-kubelet.sock"),
      log(ComponentLogger("kubelet-sim")),
      dra(std::make_unique<DraManager>(
          DraManager::Options{
              .registry_dir = fs::path(options.kubelet_dir) / "plugins_registry",
              .state_file = fs::path(options.kubelet_dir) / "dra_manager_state",
              .poll = options.plugin_poll,
              .rpc_deadline = options.rpc_deadline,
              .health_timeout = options.dra_health_timeout,
          },
          log)),
      rng(Seed(options.seed)) {}

void CleanupPluginDirectory(const fs::path& dir, spdlog::logger& log) {
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    std::error_code type_ec;
    if (!entry.is_socket(type_ec)) continue;
    std::error_code rm_ec;
    fs::remove(entry.path(), rm_ec);
    if (rm_ec) log.error("Failed to remove file {}: {}", entry.path().string(), rm_ec.message());
  }
  if (ec) {
    log.error("Failed to cleanup the device plugin directory {}: {}", dir.string(), ec.message());
  }
}

absl::StatusOr<std::unique_ptr<grpc::Server>> ServeUnix(const fs::path& socket,
                                                        grpc::Service* service) {
  if (socket.string().size() >= 108) {
    return absl::InvalidArgumentError(
        fmt::format("socket path {} is too long for a Unix socket (108 bytes)", socket.string()));
  }
  std::error_code ec;
  fs::remove(socket, ec);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket.string(), grpc::InsecureServerCredentials());
  builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    return absl::UnavailableError(fmt::format("cannot serve on {}", socket.string()));
  }
  return server;
}

void KubeletEmulator::Impl::SetDeadline(grpc::ClientContext& context) const {
  if (options.rpc_deadline) {
    context.set_deadline(std::chrono::system_clock::now() + *options.rpc_deadline);
  }
}

absl::Status KubeletEmulator::Impl::StartServing() {
  // The kubelet creates its socket directories 0750 and leaves the sockets' mode to the umask
  // (plugin/v1beta1/server.go Start, pkg/kubelet/util CreateListener); so do we.
  for (const fs::path& dir : {plugin_dir, podresources_socket.parent_path()}) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
      return absl::InternalError(fmt::format("cannot create {}: {}", dir.string(), ec.message()));
    }
    chmod(dir.c_str(), 0750);
  }
  CleanupPluginDirectory(plugin_dir, *log);
  // DRA before PodResources: claims of running pods are prepared again before they are listed.
  if (absl::Status s = dra->Start(); !s.ok()) return s;
  registration_service = MakeRegistrationService();
  absl::StatusOr<std::unique_ptr<grpc::Server>> reg =
      ServeUnix(registration_socket, registration_service.get());
  if (!reg.ok()) return reg.status();
  registration_server = std::move(*reg);
  podresources_service = MakePodResourcesService();
  absl::StatusOr<std::unique_ptr<grpc::Server>> pr =
      ServeUnix(podresources_socket, podresources_service.get());
  if (!pr.ok()) return pr.status();
  podresources_server = std::move(*pr);
  serving = true;
  return absl::OkStatus();
}

void KubeletEmulator::Impl::StopServing() {
  // Registration first: Shutdown waits for Register handlers, so no client is added after the
  // clients are taken below.
  if (registration_server) {
    registration_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    registration_server->Wait();
    registration_server.reset();
  }
  std::vector<std::shared_ptr<PluginClient>> clients;
  {
    std::lock_guard lock(mu);
    for (auto& [name, ep] : resources) {
      if (ep.client) clients.push_back(std::move(ep.client));
      ep.client.reset();
    }
  }
  for (const std::shared_ptr<PluginClient>& client : clients) client->Stop();
  dra->Stop();
  if (podresources_server) {
    podresources_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    podresources_server->Wait();
    podresources_server.reset();
  }
  std::error_code ec;
  fs::remove(registration_socket, ec);
  fs::remove(podresources_socket, ec);
  serving = false;
}

absl::Status KubeletEmulator::Impl::RestartLocked() {
  StopServing();
  {
    std::lock_guard admit(admit_mu);  // no admission straddles the restart
    std::lock_guard lock(mu);
    ++restarts;
    // The containers outlive a kubelet restart; the runtime still knows their processes.
    std::map<std::string, int> pgids;
    for (const PodRecord& pod : pods) pgids[pod.uid] = pod.pgid;
    if (absl::Status s = ReadCheckpointLocked(); !s.ok()) {
      log->error("Continue after failing to read checkpoint file: {}", std::string{s.message()});
    }
    for (PodRecord& pod : pods) {
      if (auto it = pgids.find(pod.uid); it != pgids.end()) pod.pgid = it->second;
    }
  }
  log->info("kubelet restarted: device-plugin sockets deleted, checkpoint read back");
  return StartServing();
}

void KubeletEmulator::Impl::ExpireLocked() {
  const SteadyTime now = std::chrono::steady_clock::now();
  bool removed = false;
  for (auto it = resources.begin(); it != resources.end();) {
    const Endpoint& ep = it->second;
    if (ep.stop_time && now - *ep.stop_time > options.grace_period) {
      log->info("resource {} removed: not re-registered within the grace period", it->first);
      it = resources.erase(it);
      removed = true;
    } else {
      ++it;
    }
  }
  if (removed) {
    if (absl::Status s = WriteCheckpointLocked(); !s.ok()) {
      log->error("{}", std::string{s.message()});
    }
  }
}

std::map<std::string, int> KubeletEmulator::Impl::InUseLocked() const {
  std::map<std::string, std::set<std::string>> held;
  for (const PodRecord& pod : pods) {
    for (const ContainerRecord& c : pod.containers) {
      for (const auto& [resource, ids] : c.ids) held[resource].insert(ids.begin(), ids.end());
    }
  }
  for (const auto& [resource, ids] : admitting) held[resource].insert(ids.begin(), ids.end());
  std::map<std::string, int> out;
  for (const auto& [resource, ids] : held) out[resource] = static_cast<int>(ids.size());
  return out;
}

ResourceState KubeletEmulator::Impl::StateLocked(const std::string& name,
                                                 const Endpoint& ep) const {
  ResourceState s;
  s.name = name;
  s.endpoint = ep.endpoint;
  s.connected = ep.connected;
  s.capacity = static_cast<int>(ep.devices.size());
  for (const auto& [id, dev] : ep.devices) {
    if (dev.healthy) ++s.allocatable;
    s.devices[id] = dev.healthy;
    if (!dev.numa.empty()) s.numa[id] = dev.numa;
  }
  const std::map<std::string, int> in_use = InUseLocked();
  if (auto it = in_use.find(name); it != in_use.end()) s.in_use = it->second;
  s.updates = ep.updates;
  s.get_preferred_allocation = ep.options.get_preferred_allocation_available();
  s.pre_start_required = ep.options.pre_start_required();
  return s;
}

// ---------------------------------------------------------------------------------------------

KubeletEmulator::KubeletEmulator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<KubeletEmulator>> KubeletEmulator::Start(Options options) {
  if (options.kubelet_dir.empty()) return absl::InvalidArgumentError("kubelet_dir is empty");
  options.kubelet_dir = fs::absolute(options.kubelet_dir).lexically_normal().string();
  auto impl = std::make_unique<Impl>(std::move(options));
  Impl& i = *impl;
  std::unique_ptr<KubeletEmulator> emulator(new KubeletEmulator(std::move(impl)));
  std::error_code ec;
  fs::create_directories(i.plugin_dir, ec);
  {
    std::lock_guard lock(i.mu);
    // As the kubelet: a bad checkpoint is logged and the node starts without it.
    if (absl::Status s = i.ReadCheckpointLocked(); !s.ok()) {
      i.log->error("Continue after failing to read checkpoint file: {}", std::string{s.message()});
    }
  }
  {
    std::lock_guard lifecycle(i.lifecycle_mu);
    if (absl::Status s = i.StartServing(); !s.ok()) return s;
  }
  i.control_service = i.MakeControlService(emulator.get());
  absl::StatusOr<std::unique_ptr<grpc::Server>> control =
      ServeUnix(i.control_socket, i.control_service.get());
  if (!control.ok()) return control.status();
  i.control_server = std::move(*control);
  i.log->info("kubelet emulator serving in {}", i.options.kubelet_dir);
  return emulator;
}

KubeletEmulator::~KubeletEmulator() {
  // The control service may be inside Restart(); stop it before taking lifecycle_mu.
  if (impl_->control_server) {
    impl_->control_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    impl_->control_server->Wait();
    impl_->control_server.reset();
  }
  std::error_code ec;
  fs::remove(impl_->control_socket, ec);
  std::lock_guard lifecycle(impl_->lifecycle_mu);
  impl_->StopServing();
}

absl::Status KubeletEmulator::Restart() {
  std::lock_guard lifecycle(impl_->lifecycle_mu);
  return impl_->RestartLocked();
}

absl::StatusOr<AdmittedPod> KubeletEmulator::AdmitPod(const PodSpec& pod) {
  return impl_->Admit(pod);
}

absl::Status KubeletEmulator::SetPodProcessGroup(std::string_view namespace_name,
                                                 std::string_view name, int pgid) {
  return impl_->SetProcessGroup(namespace_name, name, pgid);
}

absl::Status KubeletEmulator::DeletePod(std::string_view namespace_name, std::string_view name,
                                        std::chrono::milliseconds grace_period) {
  return impl_->Delete(namespace_name, name, grace_period);
}

std::vector<AdmittedPod> KubeletEmulator::Pods() const {
  std::lock_guard lock(impl_->mu);
  std::vector<AdmittedPod> out;
  for (const PodRecord& pod : impl_->pods) out.push_back(impl_->ToAdmitted(pod));
  return out;
}

std::optional<ResourceState> KubeletEmulator::Resource(std::string_view name) const {
  std::lock_guard lock(impl_->mu);
  impl_->ExpireLocked();
  auto it = impl_->resources.find(std::string(name));
  if (it == impl_->resources.end()) return std::nullopt;
  return impl_->StateLocked(it->first, it->second);
}

std::vector<ResourceState> KubeletEmulator::Resources() const {
  std::lock_guard lock(impl_->mu);
  impl_->ExpireLocked();
  std::vector<ResourceState> out;
  for (const auto& [name, ep] : impl_->resources) out.push_back(impl_->StateLocked(name, ep));
  return out;
}

uint64_t KubeletEmulator::registrations() const {
  std::lock_guard lock(impl_->mu);
  return impl_->registrations;
}

uint64_t KubeletEmulator::register_calls() const {
  std::lock_guard lock(impl_->mu);
  return impl_->register_calls;
}

uint64_t KubeletEmulator::pod_resources_lists() const {
  std::lock_guard lock(impl_->mu);
  return impl_->pod_resources_lists;
}

uint64_t KubeletEmulator::restarts() const {
  std::lock_guard lock(impl_->mu);
  return impl_->restarts;
}

std::map<std::string, std::vector<std::string>> KubeletEmulator::DraPlugins() const {
  return impl_->dra->Plugins();
}

const KubeletEmulator::Options& KubeletEmulator::options() const { return impl_->options; }

}  // namespace neuron::sim
