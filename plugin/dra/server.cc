#include "plugin/dra/server.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>

#include "core/base/component_log.h"
#include "dra/v1/api.grpc.pb.h"
#include "dra/v1beta1/api.grpc.pb.h"
#include "drahealth/v1/api.grpc.pb.h"
#include "drahealth/v1alpha1/api.grpc.pb.h"
#include "fmt/format.h"
#include "plugin/dra/slice.h"
#include "pluginregistration/v1/api.grpc.pb.h"

namespace neuron::plugin::dra {
namespace {

namespace fs = std::filesystem;
namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;

constexpr size_t kMaxSocketPath = 107;  // sun_path less its terminating NUL
// How often a health stream looks whether the kubelet went away while nothing changed.
constexpr std::chrono::milliseconds kStreamPoll{200};

ino_t InodeOf(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

std::vector<ClaimRef> Refs(const auto& claims) {
  std::vector<ClaimRef> out;
  for (const auto& c : claims) out.push_back({c.namespace_(), c.name(), c.uid()});
  return out;
}

// The generated types of one API version (namespaces cannot be template arguments): v1 and
// v1beta1 of DRAPlugin, v1 and v1alpha1 of DRAResourceHealth have the same messages in different
// packages.
template <typename Service, typename PrepareReq, typename PrepareResp, typename UnprepareReq,
          typename UnprepareResp>
struct DraApi {
  using DRAPlugin = Service;
  using NodePrepareResourcesRequest = PrepareReq;
  using NodePrepareResourcesResponse = PrepareResp;
  using NodeUnprepareResourcesRequest = UnprepareReq;
  using NodeUnprepareResourcesResponse = UnprepareResp;
};
using DraV1 = DraApi<drav1::DRAPlugin, drav1::NodePrepareResourcesRequest,
                     drav1::NodePrepareResourcesResponse, drav1::NodeUnprepareResourcesRequest,
                     drav1::NodeUnprepareResourcesResponse>;
using DraV1beta1 =
    DraApi<drav1beta1::DRAPlugin, drav1beta1::NodePrepareResourcesRequest,
           drav1beta1::NodePrepareResourcesResponse, drav1beta1::NodeUnprepareResourcesRequest,
           drav1beta1::NodeUnprepareResourcesResponse>;

template <typename Service, typename Req, typename Resp, typename Status, Status kUnknown,
          Status kHealthy, Status kUnhealthy>
struct HealthApi {
  using DRAResourceHealth = Service;
  using NodeWatchResourcesRequest = Req;
  using NodeWatchResourcesResponse = Resp;
  static constexpr Status UNKNOWN = kUnknown;
  static constexpr Status HEALTHY = kHealthy;
  static constexpr Status UNHEALTHY = kUnhealthy;
};
using HealthV1 = HealthApi<::v1::DRAResourceHealth, ::v1::NodeWatchResourcesRequest,
                           ::v1::NodeWatchResourcesResponse, ::v1::HealthStatus, ::v1::UNKNOWN,
                           ::v1::HEALTHY, ::v1::UNHEALTHY>;
using HealthV1alpha1 =
    HealthApi<::v1alpha1::DRAResourceHealth, ::v1alpha1::NodeWatchResourcesRequest,
              ::v1alpha1::NodeWatchResourcesResponse, ::v1alpha1::HealthStatus, ::v1alpha1::UNKNOWN,
              ::v1alpha1::HEALTHY, ::v1alpha1::UNHEALTHY>;

template <typename Api>
class DraService : public Api::DRAPlugin::Service {
 public:
  explicit DraService(Driver* driver) : driver_(driver) {}

  grpc::Status NodePrepareResources(grpc::ServerContext*,
                                    const typename Api::NodePrepareResourcesRequest* req,
                                    typename Api::NodePrepareResourcesResponse* resp) override {
    for (auto& [uid, result] : driver_->Prepare(Refs(req->claims()))) {
      auto& entry = (*resp->mutable_claims())[uid];
      if (!result.ok()) {
        entry.set_error(std::string{result.status().message()});
        continue;
      }
      for (const PreparedDevice& d : *result) {
        auto* out = entry.add_devices();
        for (const std::string& r : d.requests) out->add_request_names(r);
        out->set_pool_name(d.pool);
        out->set_device_name(d.device);
        for (const std::string& id : d.cdi_ids) out->add_cdi_device_ids(id);
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status NodeUnprepareResources(grpc::ServerContext*,
                                      const typename Api::NodeUnprepareResourcesRequest* req,
                                      typename Api::NodeUnprepareResourcesResponse* resp) override {
    for (auto& [uid, status] : driver_->Unprepare(Refs(req->claims()))) {
      auto& entry = (*resp->mutable_claims())[uid];
      if (!status.ok()) entry.set_error(std::string{status.message()});
    }
    return grpc::Status::OK;
  }

 private:
  Driver* const driver_;
};

// The latest NodeView for the health streams, and their stop signal.
class HealthHub {
 public:
  void Set(std::shared_ptr<const NodeView> view) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (view_ != nullptr && view->generation <= view_->generation) return;
      view_ = std::move(view);
    }
    cv_.notify_all();
  }
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
  }
  std::shared_ptr<const NodeView> Latest() {
    std::lock_guard<std::mutex> lock(mu_);
    return view_;
  }
  // The view once its generation differs from `seen`, nullptr on a timeout or when stopping.
  std::shared_ptr<const NodeView> Wait(uint64_t seen, bool* stopping) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, kStreamPoll,
                 [&] { return stopping_ || (view_ != nullptr && view_->generation != seen); });
    *stopping = stopping_;
    if (stopping_ || view_ == nullptr || view_->generation == seen) return nullptr;
    return view_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<const NodeView> view_;
  bool stopping_ = false;
};

// One DRAResourceHealth version (v1 has two more fields: the message and the timeout).
template <typename Api, bool kV1>
class HealthService : public Api::DRAResourceHealth::Service {
 public:
  HealthService(HealthHub* hub, const ServerOptions& o)
      : hub_(hub),
        state_(o.state),
        pool_(o.node_name),
        efa_only_(o.driver_name == kEfaDriverName),
        partitionable_(o.partitionable),
        stale_after_(o.stale_after) {}

  grpc::Status NodeWatchResources(
      grpc::ServerContext* ctx, const typename Api::NodeWatchResourcesRequest*,
      grpc::ServerWriter<typename Api::NodeWatchResourcesResponse>* writer) override {
    using Clock = std::chrono::steady_clock;
    uint64_t seen = 0;
    auto written = Clock::now();
    std::optional<std::chrono::system_clock::time_point> sent_evidence;
    while (!ctx->IsCancelled()) {
      bool stopping = false;
      std::shared_ptr<const NodeView> view = hub_->Wait(seen, &stopping);
      if (stopping) return grpc::Status::OK;
      const auto evidence = state_->evidence_time();
      // An unchanged list goes again only with evidence read since the last send.
      if (view == nullptr && seen != 0 && Clock::now() - written >= stale_after_ / 3 &&
          evidence > sent_evidence) {
        view = hub_->Latest();
      }
      if (view == nullptr) continue;
      if (!writer->Write(Response(*view, evidence))) return grpc::Status::OK;  // kubelet gone
      seen = view->generation;
      written = Clock::now();
      sent_evidence = evidence;
    }
    return grpc::Status::OK;
  }

 private:
  typename Api::NodeWatchResourcesResponse Response(
      const NodeView& view, std::optional<std::chrono::system_clock::time_point> evidence) const {
    typename Api::NodeWatchResourcesResponse out;
    const int64_t read_at =
        std::chrono::duration_cast<std::chrono::seconds>(
            evidence.value_or(std::chrono::system_clock::now()).time_since_epoch())
            .count();
    const int64_t timeout = std::chrono::ceil<std::chrono::seconds>(stale_after_).count();
    auto add = [&](const std::string& name, bool healthy, bool unknown, const std::string& why) {
      auto* d = out.add_devices();
      d->mutable_device()->set_pool_name(pool_);
      d->mutable_device()->set_device_name(name);
      d->set_health(unknown ? Api::UNKNOWN : healthy ? Api::HEALTHY : Api::UNHEALTHY);
      d->set_last_updated_time(read_at);
      if constexpr (kV1) {
        d->set_message(unknown && why.empty() ? "health evidence cannot be read" : why);
        d->set_health_check_timeout_seconds(timeout);
      }
    };
    for (const auto& [index, d] : view.devices) {
      if (!efa_only_) add(NeuronDeviceName(index), d.healthy, d.unknown, d.reason);
    }
    for (const auto& [name, e] : view.efas) add(EfaDeviceName(name), e.healthy, false, e.reason);
    if (partitionable_ && !efa_only_) AddPartitions(view, add);
    return out;
  }

  // The pool's NeuronCores (each with its device's health) and, on an UltraServer node,
  // neuron-node (the node's devices' health taken together).
  template <typename Add>
  static void AddPartitions(const NodeView& view, const Add& add) {
    const int cpd = view.cores_per_device;
    for (const auto& [index, d] : view.devices) {
      for (int k = 0; k < cpd; ++k) {
        add(CoreDeviceName(index * cpd + k), d.healthy, d.unknown, d.reason);
      }
    }
    if (!IsUltraServerNode(view)) return;
    if (const HardwareDevice* faulty = FirstFaultyDevice(view)) {
      add(std::string(kNodeDeviceName), false, false,
          fmt::format("{}: {}", NeuronDeviceName(faulty->index), faulty->reason));
      return;
    }
    const bool unknown = std::any_of(view.devices.begin(), view.devices.end(),
                                     [](const auto& kv) { return kv.second.unknown; });
    add(std::string(kNodeDeviceName), !unknown, unknown, "");
  }

  HealthHub* const hub_;
  const NodeState* const state_;
  const std::string pool_;
  const bool efa_only_;  // efa.neuron.aws.com's stream
  const bool partitionable_;
  const std::chrono::milliseconds stale_after_;
};

class RegistrationService : public ::pluginregistration::Registration::Service {
 public:
  RegistrationService(std::string_view driver, std::string endpoint)
      : driver_(driver), endpoint_(std::move(endpoint)) {}

  grpc::Status GetInfo(grpc::ServerContext*, const ::pluginregistration::InfoRequest*,
                       ::pluginregistration::PluginInfo* info) override {
    info->set_type("DRAPlugin");
    info->set_name(std::string(driver_));
    info->set_endpoint(endpoint_);
    info->add_supported_versions("v1.DRAPlugin");
    info->add_supported_versions("v1beta1.DRAPlugin");
    // The kubelet opens the health stream only on a service advertised here (pickHealthService,
    // pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go, Kubernetes 1.37; 1.36 after #141858).
    info->add_supported_versions("v1.DRAResourceHealth");
    info->add_supported_versions("v1alpha1.DRAResourceHealth");
    return grpc::Status::OK;
  }

  grpc::Status NotifyRegistrationStatus(
      grpc::ServerContext*, const ::pluginregistration::RegistrationStatus* status,
      ::pluginregistration::RegistrationStatusResponse*) override {
    registered_ = status->plugin_registered();
    const auto log = ComponentLogger("dra");
    if (status->plugin_registered()) {
      log->info("registered with the kubelet as {}", driver_);
    } else {
      log->error("the kubelet refused the registration: {}", status->error());
    }
    return grpc::Status::OK;
  }

  std::atomic<bool> registered_{false};

 private:
  const std::string_view driver_;
  const std::string endpoint_;
};

}  // namespace

std::string DraSocketPath(const std::string& kubelet_dir, const std::string& pod_uid,
                          std::string_view driver) {
  const std::string name = pod_uid.empty() ? "dra.sock" : fmt::format("dra-{}.sock", pod_uid);
  return (fs::path(kubelet_dir) / "plugins" / std::string(driver) / name).string();
}

std::string RegistrationSocketPath(const std::string& kubelet_dir, const std::string& pod_uid,
                                   std::string_view driver) {
  const std::string name = pod_uid.empty() ? fmt::format("{}-reg.sock", driver)
                                           : fmt::format("{}-{}-reg.sock", driver, pod_uid);
  return (fs::path(kubelet_dir) / "plugins_registry" / name).string();
}

absl::Status ProbeSockets(const std::string& kubelet_dir, const std::string& pod_uid,
                          std::string_view driver, std::chrono::milliseconds deadline) {
  // A channel of its own each time: a shared subchannel to a socket served again would fail.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  const auto channel = [&](const std::string& path) {
    return grpc::CreateCustomChannel("unix:" + path, grpc::InsecureChannelCredentials(), args);
  };
  const auto failed = [](const std::string& what, const grpc::Status& s) {
    return absl::UnavailableError(
        fmt::format("{}: {} ({})", what, s.error_message(), static_cast<int>(s.error_code())));
  };
  {
    const std::string path = RegistrationSocketPath(kubelet_dir, pod_uid, driver);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + deadline);
    ::pluginregistration::PluginInfo info;
    const grpc::Status s =
        ::pluginregistration::Registration::NewStub(channel(path))->GetInfo(&ctx, {}, &info);
    if (!s.ok()) return failed(fmt::format("GetInfo on {}", path), s);
  }
  const std::string path = DraSocketPath(kubelet_dir, pod_uid, driver);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline);
  drav1::NodePrepareResourcesResponse resp;
  const grpc::Status s =
      drav1::DRAPlugin::NewStub(channel(path))->NodePrepareResources(&ctx, {}, &resp);
  if (!s.ok()) return failed(fmt::format("NodePrepareResources on {}", path), s);
  return absl::OkStatus();
}

class Server::Impl {
 public:
  explicit Impl(const ServerOptions& o)
      : dra_path(DraSocketPath(o.kubelet_dir, o.pod_uid, o.driver_name)),
        reg_path(RegistrationSocketPath(o.kubelet_dir, o.pod_uid, o.driver_name)),
        v1(o.driver),
        v1beta1(o.driver),
        health_v1(&hub, o),
        health_v1alpha1(&hub, o),
        registration(o.driver_name, dra_path) {}

  absl::Status Serve(const std::string& path, const std::vector<grpc::Service*>& services,
                     std::unique_ptr<grpc::Server>* server, ino_t* inode) {
    if (path.size() > kMaxSocketPath) {
      return absl::InvalidArgumentError(fmt::format(
          "socket path {} is {} bytes; Unix sockets allow {}: use a shorter --kubelet-dir", path,
          path.size(), kMaxSocketPath));
    }
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    ::unlink(path.c_str());  // our own stale socket: the name is ours
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
    for (grpc::Service* s : services) builder.RegisterService(s);
    *server = builder.BuildAndStart();
    if (*server == nullptr) return absl::UnavailableError(fmt::format("cannot serve on {}", path));
    ::chmod(path.c_str(), 0600);  // only root (the kubelet); umask 077 covers the window
    *inode = InodeOf(path);
    ComponentLogger("dra")->info("serving on {}", path);
    return absl::OkStatus();
  }

  void Stop() {
    hub.Stop();
    StopOne(reg_server, reg_path, reg_inode);
    StopOne(dra_server, dra_path, dra_inode);
  }

  static void StopOne(std::unique_ptr<grpc::Server>& server, const std::string& path, ino_t inode) {
    if (server == nullptr) return;
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server->Wait();
    if (InodeOf(path) == inode) ::unlink(path.c_str());  // only the socket we made
  }

  const std::string dra_path, reg_path;
  HealthHub hub;
  DraService<DraV1> v1;
  DraService<DraV1beta1> v1beta1;
  HealthService<HealthV1, true> health_v1;
  HealthService<HealthV1alpha1, false> health_v1alpha1;
  RegistrationService registration;
  std::unique_ptr<grpc::Server> dra_server, reg_server;
  ino_t dra_inode = 0, reg_inode = 0;
};

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  impl->hub.Set(options.state->view());
  // The DRA socket first: the kubelet dials it as soon as it sees the registration socket.
  if (absl::Status s = impl->Serve(
          impl->dra_path, {&impl->v1, &impl->v1beta1, &impl->health_v1, &impl->health_v1alpha1},
          &impl->dra_server, &impl->dra_inode);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          impl->Serve(impl->reg_path, {&impl->registration}, &impl->reg_server, &impl->reg_inode);
      !s.ok()) {
    impl->Stop();
    return s;
  }
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Server::~Server() { impl_->Stop(); }

void Server::OnView(const std::shared_ptr<const NodeView>& view) { impl_->hub.Set(view); }

bool Server::SocketsPresent() const {
  return InodeOf(impl_->dra_path) == impl_->dra_inode &&
         InodeOf(impl_->reg_path) == impl_->reg_inode;
}

bool Server::registered() const { return impl_->registration.registered_; }

}  // namespace neuron::plugin::dra
