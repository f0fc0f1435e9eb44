#include "plugin/resource_server.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>

#include "core/base/component_log.h"
#include "core/node/withhold.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "fmt/format.h"
#include "plugin/allocation.h"

namespace neuron::plugin {
namespace {

using Clock = std::chrono::steady_clock;

// The Neuron devices an Allocate names, whole or by a core (an EFA names none).
std::set<int> RequestedDevices(const NodeView& view, Resource resource,
                               const v1beta1::AllocateRequest& request) {
  std::set<int> out;
  const ResourceView& list = view.Get(resource);
  for (const auto& container : request.container_requests()) {
    for (const std::string& id : container.devices_ids()) {
      const ResourceDevice* d = list.Find(id);
      if (d != nullptr && d->device >= 0) out.insert(d->device);
    }
  }
  return out;
}

std::string_view CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    default:
      return "OTHER";
  }
}

// The list as the kubelet sees it: what decides whether a new message is due.
struct Entry {
  std::string id;
  bool healthy;
  std::optional<int> numa;
  bool operator==(const Entry&) const = default;
};

std::vector<Entry> Entries(const ResourceView& rv) {
  std::vector<Entry> out;
  out.reserve(rv.devices.size());
  for (const ResourceDevice& d : rv.devices) out.push_back(Entry{d.id, d.healthy, d.numa});
  return out;
}

v1beta1::ListAndWatchResponse ToMessage(const std::vector<Entry>& entries) {
  v1beta1::ListAndWatchResponse msg;
  for (const Entry& e : entries) {
    v1beta1::Device* d = msg.add_devices();
    d->set_id(e.id);
    d->set_health(e.healthy ? "Healthy" : "Unhealthy");
    // Unknown NUMA: leave topology unset (no affinity), as the kubelet expects
    // (docs/kubelet-api.md#list-and-watch).
    if (e.numa) d->mutable_topology()->add_nodes()->set_id(*e.numa);
  }
  return msg;
}

}  // namespace

class ListAndWatchReactor;

class ResourceServer::Impl : public v1beta1::DevicePlugin::CallbackService {
 public:
  explicit Impl(Options options)
      : options_(std::move(options)),
        log_(ComponentLogger("plugin")),
        name_(ResourceName(options_.resource)) {}

  grpc::ServerUnaryReactor* GetDevicePluginOptions(grpc::CallbackServerContext* ctx,
                                                   const v1beta1::Empty*,
                                                   v1beta1::DevicePluginOptions* out) override {
    const Clock::time_point start = Clock::now();
    out->set_pre_start_required(false);
    out->set_get_preferred_allocation_available(true);
    return Done(ctx, "GetDevicePluginOptions", start, grpc::Status::OK);
  }

  grpc::ServerWriteReactor<v1beta1::ListAndWatchResponse>* ListAndWatch(
      grpc::CallbackServerContext* ctx, const v1beta1::Empty*) override;

  grpc::ServerUnaryReactor* GetPreferredAllocation(
      grpc::CallbackServerContext* ctx, const v1beta1::PreferredAllocationRequest* request,
      v1beta1::PreferredAllocationResponse* response) override {
    const Clock::time_point start = Clock::now();
    *response = PreferredAllocation(*options_.state->view(), options_.resource, *request);
    return Done(ctx, "GetPreferredAllocation", start, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* Allocate(grpc::CallbackServerContext* ctx,
                                     const v1beta1::AllocateRequest* request,
                                     v1beta1::AllocateResponse* response) override {
    const Clock::time_point start = Clock::now();
    std::vector<ContainerPlan> plans;
    // Held until the commit is done: a check or reset that withholds one of these devices either
    // waits for this allocation, and then sees it, or refuses it (core/node/withhold.h).
    absl::StatusOr<AllocationHolds> holds = HoldForAllocation(
        options_.root, RequestedDevices(*options_.state->view(), options_.resource, *request));
    if (holds.ok() && !holds->unusable.empty()) {
      log_->warn("{}: Allocate without the withhold locks: {}", name_, holds->unusable);
    }
    if (!holds.ok()) {
      log_->warn("{}: Allocate refused: {}", name_, std::string{holds.status().message()});
      return Done(
          ctx, "Allocate", start,
          grpc::Status(grpc::StatusCode::UNAVAILABLE, std::string{holds.status().message()}));
    }
    absl::StatusOr<std::shared_ptr<const NodeView>> view = options_.state->Commit(
        options_.resource, [&](const NodeView& v) -> absl::StatusOr<std::vector<std::string>> {
          absl::StatusOr<std::vector<ContainerPlan>> p =
              ValidateAllocate(v, options_.resource, *request, options_.noncontiguous);
          if (!p.ok()) return p.status();
          plans = *std::move(p);
          std::vector<std::string> ids;
          for (const ContainerPlan& plan : plans) {
            ids.insert(ids.end(), plan.ids.begin(), plan.ids.end());
          }
          return ids;
        });
    if (!view.ok()) {
      log_->warn("{}: Allocate refused: {}", name_, std::string{view.status().message()});
      return Done(
          ctx, "Allocate", start,
          grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string{view.status().message()}));
    }
    *response = BuildAllocateResponse(**view, options_.resource, plans, options_.cdi,
                                      options_.device_numbering);
    for (const ContainerPlan& plan : plans) {
      if (!plan.noncontiguous) continue;
      options_.metrics->NonContiguous(options_.resource);
      log_->warn("{}: non-contiguous allocation {} (policy warn: allowed)", name_,
                 fmt::join(plan.ids, ","));
    }
    return Done(ctx, "Allocate", start, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* PreStartContainer(grpc::CallbackServerContext* ctx,
                                              const v1beta1::PreStartContainerRequest*,
                                              v1beta1::PreStartContainerResponse*) override {
    return Done(ctx, "PreStartContainer", Clock::now(), grpc::Status::OK);
  }

  void Add(ListAndWatchReactor* r) {
    std::lock_guard<std::mutex> lock(mu_);
    streams_.insert(r);
  }
  void Remove(ListAndWatchReactor* r, Clock::time_point started, bool by_us) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      streams_.erase(r);
    }
    if (!by_us && options_.on_stream_end) options_.on_stream_end(options_.resource, started);
  }
  void OnView(const std::shared_ptr<const NodeView>& view);
  void CloseStreams();

  Options options_;
  std::shared_ptr<spdlog::logger> log_;
  std::string name_;
  std::unique_ptr<grpc::Server> server_;
  ino_t inode_ = 0;

 private:
  grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx, std::string_view rpc,
                                 Clock::time_point start, const grpc::Status& status) {
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    options_.metrics->ObserveRpc(options_.resource, rpc, CodeName(status.error_code()), seconds);
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(status);
    return reactor;
  }

  mutable std::mutex mu_;
  std::set<ListAndWatchReactor*> streams_;  // guarded by mu_
};

// One kubelet ListAndWatch stream: the full list at once, then again whenever it changes; kept
// open until the kubelet leaves or the server shuts down. Reactions run on gRPC threads, so the
// state below is guarded by mu_, and gRPC calls are made outside it.
class ListAndWatchReactor : public grpc::ServerWriteReactor<v1beta1::ListAndWatchResponse> {
 public:
  explicit ListAndWatchReactor(ResourceServer::Impl* owner)
      : owner_(owner), started_(Clock::now()) {
    owner_->Add(this);
    Push(owner_->options_.state->view());
  }

  void Push(const std::shared_ptr<const NodeView>& view) {
    std::unique_lock<std::mutex> lock(mu_);
    if (finishing_ || view->generation <= generation_) return;
    generation_ = view->generation;
    std::vector<Entry> entries = Entries(view->Get(owner_->options_.resource));
    if (sent_any_ && entries == last_) return;
    last_ = std::move(entries);
    sent_any_ = true;
    pending_ = true;
    if (writing_) return;  // OnWriteDone sends the newest list
    StartNextLocked(lock);
  }

  // Server shutdown: finish with OK (after a write in flight completes).
  void Close() {
    std::unique_lock<std::mutex> lock(mu_);
    by_us_ = true;
    RequestFinishLocked(lock, grpc::Status::OK);
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok) {
      RequestFinishLocked(lock, grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed"));
      return;
    }
    if (finish_wanted_) {
      RequestFinishLocked(lock, finish_status_);
      return;
    }
    if (pending_) StartNextLocked(lock);
  }

  void OnCancel() override {
    std::unique_lock<std::mutex> lock(mu_);
    RequestFinishLocked(lock, grpc::Status::CANCELLED);
  }

  void OnDone() override {
    bool by_us;
    {
      std::lock_guard<std::mutex> lock(mu_);
      by_us = by_us_;
    }
    owner_->Remove(this, started_, by_us);
    delete this;
  }

 private:
  void StartNextLocked(std::unique_lock<std::mutex>& lock) {
    message_ = ToMessage(last_);
    pending_ = false;
    writing_ = true;
    lock.unlock();
    owner_->options_.metrics->ListAndWatchSent(owner_->options_.resource);
    StartWrite(&message_);
  }

  void RequestFinishLocked(std::unique_lock<std::mutex>& lock, const grpc::Status& status) {
    if (finished_) return;
    finishing_ = true;
    if (writing_) {  // Finish must wait for the write in flight
      finish_wanted_ = true;
      finish_status_ = status;
      return;
    }
    finished_ = true;
    lock.unlock();
    Finish(status);
  }

  ResourceServer::Impl* const owner_;
  const Clock::time_point started_;
  std::mutex mu_;
  uint64_t generation_ = 0;
  std::vector<Entry> last_;
  bool sent_any_ = false;
  bool pending_ = false;
  bool writing_ = false;
  bool finishing_ = false;
  bool finish_wanted_ = false;
  bool finished_ = false;
  bool by_us_ = false;
  grpc::Status finish_status_;
  v1beta1::ListAndWatchResponse message_;  // the write in flight; touched only when !writing_
};

grpc::ServerWriteReactor<v1beta1::ListAndWatchResponse>* ResourceServer::Impl::ListAndWatch(
    grpc::CallbackServerContext*, const v1beta1::Empty*) {
  log_->info("{}: ListAndWatch stream opened", name_);
  return new ListAndWatchReactor(this);
}

void ResourceServer::Impl::OnView(const std::shared_ptr<const NodeView>& view) {
  std::lock_guard<std::mutex> lock(mu_);
  for (ListAndWatchReactor* r : streams_) r->Push(view);
}

void ResourceServer::Impl::CloseStreams() {
  std::lock_guard<std::mutex> lock(mu_);
  for (ListAndWatchReactor* r : streams_) r->Close();
}

absl::StatusOr<std::unique_ptr<ResourceServer>> ResourceServer::Start(Options options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  const std::string& path = impl->options_.socket_path;
  ::unlink(path.c_str());  // our own stale socket (the name is unique to this plugin)
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  builder.RegisterService(impl.get());
  impl->server_ = builder.BuildAndStart();
  if (impl->server_ == nullptr) {
    return absl::UnavailableError(fmt::format("cannot serve {} on {}", impl->name_, path));
  }
  // Only root (the kubelet) may connect: connecting needs write permission on the socket.
  // main() sets umask 077 as well, so the socket is never open to others, even briefly.
  if (::chmod(path.c_str(), 0600) != 0) {
    impl->log_->warn("{}: chmod 0600 {}: {}", impl->name_, path, std::strerror(errno));
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) impl->inode_ = st.st_ino;
  impl->log_->info("{}: serving on {}", impl->name_, path);
  return std::unique_ptr<ResourceServer>(new ResourceServer(std::move(impl)));
}

ResourceServer::ResourceServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ResourceServer::~ResourceServer() {
  impl_->CloseStreams();
  impl_->server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  impl_->server_->Wait();
  if (SocketPresent()) ::unlink(impl_->options_.socket_path.c_str());
  impl_->log_->info("{}: stopped serving on {}", impl_->name_, impl_->options_.socket_path);
}

void ResourceServer::OnView(const std::shared_ptr<const NodeView>& view) { impl_->OnView(view); }

bool ResourceServer::SocketPresent() const {
  struct stat st {};
  return ::stat(impl_->options_.socket_path.c_str(), &st) == 0 && st.st_ino == impl_->inode_;
}

}  // namespace neuron::plugin
