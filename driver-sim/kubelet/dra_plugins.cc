// The plugin watcher and the DRA plugin store (dra_manager.h), written from kubernetes/kubernetes:
//   pkg/kubelet/pluginmanager/operationexecutor/operation_generator.go: GetInfo on the socket,
//     the handler chosen by PluginInfo.type, ValidatePlugin then RegisterPlugin, and
//     NotifyRegistrationStatus with "RegisterPlugin error -- ..." texts; an empty endpoint means
//     the registration socket itself;
//   pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go: validateSupportedServices (the first of the
//     plugin's supported_versions that the kubelet knows: v1.DRAPlugin, v1beta1.DRAPlugin;
//     "empty list of supported gRPC services (aka supported versions)" / "none of services
//     supported by the plugin (...) are supported by the kubelet (...)"), one endpoint per plugin
//     instance ("endpoint %s already registered for DRA driver plugin %s"), GetPlugin picking the
//     newest instance ("DRA driver %s is not registered"), defaultClientCallTimeout 45 s; the
//     health service each plugin advertises (pickHealthService, dra_health.h);
//   pkg/kubelet/pluginmanager/reconciler: a failed registration is retried with exponential
//     back-off (500 ms doubling to 2 min 2 s, pkg/util/goroutinemap/exponentialbackoff).
#include "driver-sim/kubelet/dra_plugins.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "dra/v1/api.grpc.pb.h"
#include "dra/v1beta1/api.grpc.pb.h"
#include "driver-sim/kubelet/rpc_error.h"
#include "pluginregistration/v1/api.grpc.pb.h"

namespace neuron::sim {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kV1 = "v1.DRAPlugin";
constexpr std::string_view kV1beta1 = "v1beta1.DRAPlugin";
constexpr std::chrono::milliseconds kFirstRetry{500};
constexpr std::chrono::milliseconds kMaxRetry{122'000};
constexpr std::chrono::seconds kDialTimeout{10};  // operation_generator's dial/GetInfo deadline

std::string Quoted(const std::vector<std::string>& list) {
  std::string out = "[";
  for (size_t i = 0; i < list.size(); ++i) out += fmt::format("{}\"{}\"", i ? " " : "", list[i]);
  return out + "]";
}

absl::StatusOr<std::string> ChooseService(const std::vector<std::string>& supported) {
  if (supported.empty()) {
    return absl::InvalidArgumentError(
        "empty list of supported gRPC services (aka supported versions)");
  }
  for (const std::string& s : supported) {
    if (s == kV1 || s == kV1beta1) return s;
  }
  return absl::InvalidArgumentError(
      fmt::format("none of services supported by the plugin ({}) are supported by the kubelet ({})",
                  Quoted(supported), Quoted({std::string(kV1), std::string(kV1beta1)})));
}

// The same RPCs on v1 and v1beta1, whose messages differ only in their package.
template <typename Svc, typename PrepReq, typename PrepResp, typename UnReq, typename UnResp>
struct DraApi {
  static absl::StatusOr<std::map<std::string, PrepareResult>> Prepare(
      grpc::Channel& channel, const std::vector<ClaimRef>& claims, grpc::ClientContext& context) {
    auto stub = Svc::NewStub(std::shared_ptr<grpc::Channel>(&channel, [](grpc::Channel*) {}));
    PrepReq request;
    for (const ClaimRef& c : claims) Fill(c, request.add_claims());
    PrepResp response;
    const grpc::Status s = stub->NodePrepareResources(&context, request, &response);
    if (!s.ok()) return absl::UnknownError(fmt::format("NodePrepareResources: {}", RpcError(s)));
    std::map<std::string, PrepareResult> out;
    for (const auto& [uid, result] : response.claims()) {
      PrepareResult& r = out[uid];
      r.error = result.error();
      for (const auto& d : result.devices()) {
        // The driver is the caller's to fill in: it knows whom it asked.
        r.devices.push_back(PreparedDevice{"",
                                           {d.request_names().begin(), d.request_names().end()},
                                           d.pool_name(),
                                           d.device_name(),
                                           {d.cdi_device_ids().begin(), d.cdi_device_ids().end()}});
      }
    }
    return out;
  }
  static absl::StatusOr<std::map<std::string, std::string>> Unprepare(
      grpc::Channel& channel, const std::vector<ClaimRef>& claims, grpc::ClientContext& context) {
    auto stub = Svc::NewStub(std::shared_ptr<grpc::Channel>(&channel, [](grpc::Channel*) {}));
    UnReq request;
    for (const ClaimRef& c : claims) Fill(c, request.add_claims());
    UnResp response;
    const grpc::Status s = stub->NodeUnprepareResources(&context, request, &response);
    if (!s.ok()) return absl::UnknownError(fmt::format("NodeUnprepareResources: {}", RpcError(s)));
    std::map<std::string, std::string> out;
    for (const auto& [uid, result] : response.claims()) out[uid] = result.error();
    return out;
  }
  template <typename Claim>
  static void Fill(const ClaimRef& c, Claim* out) {
    out->set_namespace_(c.namespace_name);
    out->set_uid(c.uid);
    out->set_name(c.name);
  }
};

namespace dv1 = k8s::io::kubelet::pkg::apis::dra::v1;
namespace dv1beta1 = k8s::io::kubelet::pkg::apis::dra::v1beta1;
using V1Api =
    DraApi<dv1::DRAPlugin, dv1::NodePrepareResourcesRequest, dv1::NodePrepareResourcesResponse,
           dv1::NodeUnprepareResourcesRequest, dv1::NodeUnprepareResourcesResponse>;
using V1beta1Api =
    DraApi<dv1beta1::DRAPlugin, dv1beta1::NodePrepareResourcesRequest,
           dv1beta1::NodePrepareResourcesResponse, dv1beta1::NodeUnprepareResourcesRequest,
           dv1beta1::NodeUnprepareResourcesResponse>;

struct Plugin {
  std::string endpoint;
  std::string service;         // kV1 or kV1beta1
  std::string health_service;  // PickHealthService's: kHealthV1, kHealthV1alpha1 or ""
  std::shared_ptr<grpc::Channel> channel;
};

// What the watcher knows of one socket file in plugins_registry/.
struct SocketState {
  ino_t inode = 0;
  bool registered = false;
  std::string driver;
  std::string endpoint;
  std::chrono::steady_clock::time_point retry_at{};
  std::chrono::milliseconds backoff{0};
};

}  // namespace

class DraPluginStore::Impl {
 public:
  Impl(fs::path dir, std::chrono::milliseconds poll, std::chrono::milliseconds deadline,
       std::shared_ptr<spdlog::logger> log)
      : dir_(std::move(dir)), poll_(poll), deadline_(deadline), log_(std::move(log)) {}

  void Start(std::function<void(const std::string&)> on_registered,
             std::function<void(const std::string&)> on_changed) {
    Stop();
    on_changed_ = std::move(on_changed);
    std::error_code ec;
    fs::create_directories(dir_, ec);
    Scan(nullptr);
    {
      std::lock_guard lock(mu_);
      stop_ = false;
    }
    thread_ = std::thread([this, cb = std::move(on_registered)] { Run(cb); });
  }

  void Stop() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    std::lock_guard lock(mu_);
    plugins_.clear();
    sockets_.clear();
  }

  template <typename Result, typename Call>
  absl::StatusOr<Result> OnPlugin(const std::string& driver, const Call& call) {
    Plugin plugin;
    {
      std::lock_guard lock(mu_);
      auto it = plugins_.find(driver);
      if (it == plugins_.end() || it->second.empty()) {
        return absl::UnavailableError(
            fmt::format("failed to get gRPC client for driver {}: DRA driver {} is not registered",
                        driver, driver));
      }
      plugin = it->second.back();
    }
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + deadline_);
    return call(plugin, context);
  }

  std::optional<HealthTarget> Newest(const std::string& driver) const {
    std::lock_guard lock(mu_);
    auto it = plugins_.find(driver);
    if (it == plugins_.end() || it->second.empty()) return std::nullopt;
    return HealthTarget{it->second.back().endpoint, it->second.back().health_service};
  }

  std::map<std::string, std::vector<std::string>> Plugins() const {
    std::lock_guard lock(mu_);
    std::map<std::string, std::vector<std::string>> out;
    for (const auto& [driver, list] : plugins_) {
      for (const Plugin& p : list) out[driver].push_back(p.endpoint);
    }
    return out;
  }

 private:
  void Run(const std::function<void(const std::string&)>& on_registered) {
    std::unique_lock lock(mu_);
    while (!wake_.wait_for(lock, poll_, [this] { return stop_; })) {
      lock.unlock();
      Scan(&on_registered);
      lock.lock();
    }
  }

  // One pass over plugins_registry/: new (or re-created) sockets are registered, failed ones
  // retried when their back-off is over, vanished ones deregistered.
  void Scan(const std::function<void(const std::string&)>* on_registered) {
    std::map<std::string, ino_t> present;
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(dir_, ec)) {
      const std::string name = e.path().filename().string();
      std::error_code type_ec;
      if (name.starts_with(".") || !e.is_socket(type_ec)) continue;  // the watcher skips these
      struct stat st {};
      if (stat(e.path().c_str(), &st) == 0) present[e.path().string()] = st.st_ino;
    }
    std::vector<std::string> todo;
    std::set<std::string> gone;  // drivers that lost a plugin
    {
      std::lock_guard lock(mu_);
      const auto now = std::chrono::steady_clock::now();
      for (auto it = sockets_.begin(); it != sockets_.end();) {
        auto p = present.find(it->first);
        if (p == present.end() || p->second != it->second.inode) {
          if (it->second.registered) {
            DeregisterLocked(it->second.driver, it->second.endpoint);
            gone.insert(it->second.driver);
          }
          it = sockets_.erase(it);
        } else {
          ++it;
        }
      }
      for (const auto& [path, inode] : present) {
        SocketState fresh;
        fresh.inode = inode;
        auto [it, added] = sockets_.try_emplace(path, std::move(fresh));
        if (added || (!it->second.registered && now >= it->second.retry_at)) todo.push_back(path);
      }
    }
    for (const std::string& driver : gone) Changed(driver);
    for (const std::string& path : todo) {
      std::optional<std::string> driver = Register(path);
      if (!driver) continue;
      Changed(*driver);
      if (on_registered != nullptr && *on_registered) (*on_registered)(*driver);
    }
  }

  void Changed(const std::string& driver) {
    if (on_changed_) on_changed_(driver);
  }

  void DeregisterLocked(const std::string& driver, const std::string& endpoint) {
    auto it = plugins_.find(driver);
    if (it == plugins_.end()) return;
    std::erase_if(it->second, [&](const Plugin& p) { return p.endpoint == endpoint; });
    if (it->second.empty()) plugins_.erase(it);
    log_->info("DRA plugin {} at {} deregistered: its registration socket is gone", driver,
               endpoint);
  }

  // The operation generator's registration of one socket; the driver's name on success.
  std::optional<std::string> Register(const std::string& socket) {
    auto channel = grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials());
    auto stub = pluginregistration::Registration::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kDialTimeout);
    pluginregistration::PluginInfo info;
    const grpc::Status s = stub->GetInfo(&context, pluginregistration::InfoRequest(), &info);
    if (!s.ok()) {
      return Failed(socket, "",
                    fmt::format("RegisterPlugin error -- failed to get plugin info "
                                "using RPC GetInfo at socket {}, err: {}",
                                socket, RpcError(s)));
    }
    const std::string endpoint = info.endpoint().empty() ? socket : info.endpoint();
    if (info.type() != "DRAPlugin") {
      return Failed(socket, endpoint,
                    fmt::format("RegisterPlugin error -- no handler registered for plugin type: "
                                "{} at socket {}",
                                info.type(), socket),
                    stub.get());
    }
    const std::vector<std::string> versions(info.supported_versions().begin(),
                                            info.supported_versions().end());
    absl::StatusOr<std::string> service = ChooseService(versions);
    const std::string health = PickHealthService(versions);
    if (!service.ok()) {
      return Failed(socket, endpoint,
                    fmt::format("RegisterPlugin error -- plugin validation failed with err: "
                                "invalid supported gRPC versions of DRA driver plugin {} at "
                                "endpoint {}: {}",
                                info.name(), endpoint, std::string{service.status().message()}),
                    stub.get());
    }
    if (absl::Status added = Add(info.name(), endpoint, *service, health); !added.ok()) {
      return Failed(socket, endpoint,
                    fmt::format("RegisterPlugin error -- plugin registration failed with err: {}",
                                std::string{added.message()}),
                    stub.get());
    }
    Notify(*stub, true, "");
    {
      std::lock_guard lock(mu_);
      if (auto it = sockets_.find(socket); it != sockets_.end()) {
        it->second.registered = true;
        it->second.driver = info.name();
        it->second.endpoint = endpoint;
      }
    }
    log_->info("DRA plugin {} registered at {} ({}; health: {})", info.name(), endpoint, *service,
               health.empty() ? "none" : health);
    return info.name();
  }

  absl::Status Add(const std::string& driver, const std::string& endpoint,
                   const std::string& service, const std::string& health) {
    std::lock_guard lock(mu_);
    std::vector<Plugin>& list = plugins_[driver];
    for (const Plugin& p : list) {
      if (p.endpoint == endpoint) {
        return absl::AlreadyExistsError(fmt::format(
            "endpoint {} already registered for DRA driver plugin {}", endpoint, driver));
      }
    }
    list.push_back({endpoint, service, health,
                    grpc::CreateChannel("unix:" + endpoint, grpc::InsecureChannelCredentials())});
    return absl::OkStatus();
  }

  std::optional<std::string> Failed(const std::string& socket, const std::string& endpoint,
                                    const std::string& why,
                                    pluginregistration::Registration::Stub* stub = nullptr) {
    log_->error("{} (endpoint {})", why, endpoint);
    if (stub != nullptr) Notify(*stub, false, why);
    std::lock_guard lock(mu_);
    if (auto it = sockets_.find(socket); it != sockets_.end()) {
      SocketState& st = it->second;
      st.backoff = st.backoff.count() == 0 ? kFirstRetry : std::min(st.backoff * 2, kMaxRetry);
      st.retry_at = std::chrono::steady_clock::now() + st.backoff;
    }
    return std::nullopt;
  }

  void Notify(pluginregistration::Registration::Stub& stub, bool registered,
              const std::string& error) {
    pluginregistration::RegistrationStatus status;
    status.set_plugin_registered(registered);
    status.set_error(error);
    pluginregistration::RegistrationStatusResponse reply;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kDialTimeout);
    const grpc::Status s = stub.NotifyRegistrationStatus(&context, status, &reply);
    if (!s.ok()) log_->error("NotifyRegistrationStatus failed: {}", RpcError(s));
  }

  const fs::path dir_;
  const std::chrono::milliseconds poll_;
  const std::chrono::milliseconds deadline_;
  std::shared_ptr<spdlog::logger> log_;
  // Set by Start before the watcher runs, read only by it (and Start's own walk).
  std::function<void(const std::string&)> on_changed_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;                                   // guarded by mu_
  std::map<std::string, std::vector<Plugin>> plugins_;  // guarded by mu_
  std::map<std::string, SocketState> sockets_;          // guarded by mu_
  std::thread thread_;
};

DraPluginStore::DraPluginStore(fs::path registry_dir, std::chrono::milliseconds poll,
                               std::chrono::milliseconds rpc_deadline,
                               std::shared_ptr<spdlog::logger> log)
    : impl_(std::make_unique<Impl>(std::move(registry_dir), poll, rpc_deadline, std::move(log))) {}
DraPluginStore::~DraPluginStore() { Stop(); }
void DraPluginStore::Start(std::function<void(const std::string&)> on_registered,
                           std::function<void(const std::string&)> on_changed) {
  impl_->Start(std::move(on_registered), std::move(on_changed));
}
std::optional<HealthTarget> DraPluginStore::Newest(const std::string& driver) const {
  return impl_->Newest(driver);
}
void DraPluginStore::Stop() { impl_->Stop(); }
std::map<std::string, std::vector<std::string>> DraPluginStore::Plugins() const {
  return impl_->Plugins();
}

absl::StatusOr<std::map<std::string, PrepareResult>> DraPluginStore::NodePrepare(
    const std::string& driver, const std::vector<ClaimRef>& claims) {
  return impl_->OnPlugin<std::map<std::string, PrepareResult>>(
      driver, [&](const Plugin& p, grpc::ClientContext& context) {
        return p.service == kV1 ? V1Api::Prepare(*p.channel, claims, context)
                                : V1beta1Api::Prepare(*p.channel, claims, context);
      });
}

absl::StatusOr<std::map<std::string, std::string>> DraPluginStore::NodeUnprepare(
    const std::string& driver, const std::vector<ClaimRef>& claims) {
  return impl_->OnPlugin<std::map<std::string, std::string>>(
      driver, [&](const Plugin& p, grpc::ClientContext& context) {
        return p.service == kV1 ? V1Api::Unprepare(*p.channel, claims, context)
                                : V1beta1Api::Unprepare(*p.channel, claims, context);
      });
}

}  // namespace neuron::sim
