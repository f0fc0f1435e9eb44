#include "proto/pod_resources.h"

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/model/device_id.h"
#include "podresources/v1/api.grpc.pb.h"

namespace neuron {

PodAssignments::PodAssignments(std::vector<PodDeviceAssignment> assignments)
    : assignments_(std::move(assignments)) {
  for (size_t i = 0; i < assignments_.size(); ++i) {
    if (assignments_[i].whole_node && !whole_node_) whole_node_ = i;
    for (const std::string& id : assignments_[i].ids) {
      index_.try_emplace(std::make_pair(assignments_[i].resource, id), i);
    }
  }
}

const PodDeviceAssignment* PodAssignments::Holder(std::string_view resource,
                                                  std::string_view id) const {
  auto it = index_.find(std::make_pair(std::string(resource), std::string(id)));
  if (it != index_.end()) return &assignments_[it->second];
  if (whole_node_ && (resource == kResourceNeuron || resource == kResourceNeuronCore ||
                      resource == kResourceNeuronDevice)) {
    return &assignments_[*whole_node_];
  }
  return nullptr;
}

namespace {

absl::Status FromGrpc(const grpc::Status& s, const std::string& socket_path) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat("PodResources List on ", socket_path, ": ", s.error_message()));
}

std::shared_ptr<grpc::Channel> Dial(const std::string& socket_path) {
  grpc::ChannelArguments args;
  // The kubelet's PodResources server is local; keep reconnect attempts short so a restarted
  // kubelet is found quickly even on a channel that is kept.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel("unix:" + socket_path, grpc::InsecureChannelCredentials(), args);
}

absl::StatusOr<PodAssignments> List(grpc::Channel& channel, const std::string& socket_path,
                                    std::chrono::milliseconds timeout) {
  auto stub = v1::PodResourcesLister::NewStub(
      std::shared_ptr<grpc::Channel>(&channel, [](grpc::Channel*) {}));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  v1::ListPodResourcesResponse response;
  grpc::Status status = stub->List(&context, v1::ListPodResourcesRequest(), &response);
  if (!status.ok()) return FromGrpc(status, socket_path);

  return AssignmentsFromList(response);
}

// The assignments of one DynamicResource: one per claim device.
void AddClaimDevices(const v1::PodResources& pod, const v1::ContainerResources& container,
                     const v1::DynamicResource& dynamic, std::vector<PodDeviceAssignment>& out) {
  for (const v1::ClaimResource& r : dynamic.claim_resources()) {
    DraClaimDevice claim{
        .claim_namespace = dynamic.claim_namespace(),
        .claim_name = dynamic.claim_name(),
        .driver = r.driver_name(),
        .pool = r.pool_name(),
        .device = r.device_name(),
        .cdi_devices = {},
    };
    for (const v1::CDIDevice& cdi : r.cdi_devices()) claim.cdi_devices.push_back(cdi.name());
    const std::optional<PlacedDraDevice> placed = MapDraDevice(r.driver_name(), r.device_name());
    PodDeviceAssignment a{
        .pod_namespace = pod.namespace_(),
        .pod_name = pod.name(),
        .container = container.name(),
        .resource = placed ? placed->resource : r.driver_name(),
        .ids = {placed ? placed->id : r.device_name()},
        .claim = std::move(claim),
        .whole_node = placed && placed->whole_node,
    };
    if (a.whole_node) a.ids.clear();
    out.push_back(std::move(a));
  }
}

// The index after `prefix` in `name`, when it is a valid index ID (no sign, no leading zeros).
std::optional<std::string> IndexAfter(std::string_view name, std::string_view prefix, int limit) {
  if (!name.starts_with(prefix)) return std::nullopt;
  const std::string_view rest = name.substr(prefix.size());
  if (!ParseIndexId(rest, limit).ok()) return std::nullopt;
  return std::string(rest);
}

}  // namespace

std::optional<PlacedDraDevice> MapDraDevice(std::string_view driver, std::string_view device) {
  constexpr std::string_view kEfa = "efa-";
  const auto efa = [&]() -> std::optional<PlacedDraDevice> {
    if (!device.starts_with(kEfa) || !ValidateEfaId(device.substr(kEfa.size())).ok()) {
      return std::nullopt;
    }
    return PlacedDraDevice{std::string(kResourceEfa), std::string(device.substr(kEfa.size()))};
  };
  if (driver == kDraDriverEfa) return efa();
  if (driver != kDraDriverNeuron) return std::nullopt;
  // Our UltraServer device: it consumes every device's counters (docs/kubelet-api.md#dra-slice).
  if (device == "neuron-node") return PlacedDraDevice{std::string(kResourceNeuron), "", true};
  // Order matters: "neuroncore-" and "neurondevice" share the prefix "neuron".
  if (auto core = IndexAfter(device, "neuroncore-", kMaxDevices * kMaxCoresPerDevice)) {
    return PlacedDraDevice{std::string(kResourceNeuronCore), *core};
  }
  for (std::string_view prefix : {"neuron-", "neurondevice"}) {
    if (auto index = IndexAfter(device, prefix, kMaxDevices)) {
      return PlacedDraDevice{std::string(kResourceNeuron), *index};
    }
  }
  return efa();
}

PodAssignments AssignmentsFromList(const v1::ListPodResourcesResponse& response) {
  std::vector<PodDeviceAssignment> out;
  for (const v1::PodResources& pod : response.pod_resources()) {
    for (const v1::ContainerResources& container : pod.containers()) {
      for (const v1::ContainerDevices& devices : container.devices()) {
        if (devices.device_ids().empty()) continue;
        out.push_back(PodDeviceAssignment{
            .pod_namespace = pod.namespace_(),
            .pod_name = pod.name(),
            .container = container.name(),
            .resource = devices.resource_name(),
            .ids = {devices.device_ids().begin(), devices.device_ids().end()},
        });
      }
      for (const v1::DynamicResource& dynamic : container.dynamic_resources()) {
        AddClaimDevices(pod, container, dynamic, out);
      }
    }
  }
  return PodAssignments(std::move(out));
}

absl::StatusOr<PodAssignments> ListPodResources(const std::string& socket_path,
                                                std::chrono::milliseconds timeout) {
  std::shared_ptr<grpc::Channel> channel = Dial(socket_path);
  return List(*channel, socket_path, timeout);
}

// The refresh thread owns the channel; readers see `latest_` and the counters under `mu_`.
class PodResourcesCache::Impl {
 public:
  explicit Impl(Options options)
      : options_(std::move(options)),
        latest_(std::make_shared<const PodAssignments>()),
        thread_([this] { Run(); }) {}

  ~Impl() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  std::shared_ptr<const PodAssignments> Latest() const {
    std::lock_guard lock(mu_);
    return latest_;
  }
  absl::Status LastStatus() const {
    std::lock_guard lock(mu_);
    return last_status_;
  }
  uint64_t refreshes() const {
    std::lock_guard lock(mu_);
    return refreshes_;
  }
  uint64_t failures() const {
    std::lock_guard lock(mu_);
    return failures_;
  }
  void RefreshSoon() {
    {
      std::lock_guard lock(mu_);
      soon_ = true;
    }
    wake_.notify_all();
  }

 private:
  void Run() {
    std::shared_ptr<grpc::Channel> channel;
    bool first = true;
    std::unique_lock lock(mu_);
    while (!stop_) {
      lock.unlock();
      if (!channel) channel = Dial(options_.socket_path);
      absl::StatusOr<PodAssignments> answer =
          List(*channel, options_.socket_path, options_.timeout);
      const absl::Status status = answer.status();  // `answer` may be moved from below
      std::shared_ptr<const PodAssignments> changed;
      if (!answer.ok()) {
        channel.reset();
      } else if (first || answer->all() != Latest()->all()) {
        changed = std::make_shared<const PodAssignments>(*std::move(answer));
        first = false;
      }
      lock.lock();
      if (status.ok()) {
        ++refreshes_;
        if (changed) latest_ = changed;
      } else {
        ++failures_;
      }
      last_status_ = status;
      std::chrono::milliseconds wait = options_.period;
      if (status.ok() && options_.on_answer) {
        const std::shared_ptr<const PodAssignments> latest = latest_;
        lock.unlock();
        wait = options_.on_answer(latest, changed != nullptr);
        lock.lock();
      }
      wake_.wait_for(lock, wait, [this] { return stop_ || soon_; });
      soon_ = false;
    }
  }

  const Options options_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool soon_ = false;
  std::shared_ptr<const PodAssignments> latest_;
  absl::Status last_status_ = absl::UnavailableError("PodResources: no refresh yet");
  uint64_t refreshes_ = 0;
  uint64_t failures_ = 0;
  std::thread thread_;  // last: starts after every other member is ready
};

PodResourcesCache::PodResourcesCache(Options options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
PodResourcesCache::~PodResourcesCache() = default;
std::shared_ptr<const PodAssignments> PodResourcesCache::Latest() const { return impl_->Latest(); }
absl::Status PodResourcesCache::LastStatus() const { return impl_->LastStatus(); }
uint64_t PodResourcesCache::refreshes() const { return impl_->refreshes(); }
uint64_t PodResourcesCache::failures() const { return impl_->failures(); }
void PodResourcesCache::RefreshSoon() { impl_->RefreshSoon(); }

}  // namespace neuron
