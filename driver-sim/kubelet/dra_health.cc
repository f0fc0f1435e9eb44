// The kubelet's DRA health cache and streams (dra_health.h says what is modelled and from where).
#include "driver-sim/kubelet/dra_health.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <condition_variable>
#include <thread>

#include "drahealth/v1/api.grpc.pb.h"
#include "drahealth/v1alpha1/api.grpc.pb.h"

namespace neuron::sim {

namespace {

constexpr std::chrono::milliseconds kDefaultHealthTimeout{30'000};  // DefaultHealthTimeout
constexpr size_t kMaxMessage = 1024;                                // truncateHealthMessage's limit

template <typename Status>
DeviceHealthStatus FromWire(Status s) {
  if (s == Status::HEALTHY) return DeviceHealthStatus::kHealthy;
  if (s == Status::UNHEALTHY) return DeviceHealthStatus::kUnhealthy;
  return DeviceHealthStatus::kUnknown;
}

// buildDeviceHealth for v1 (timeout and message) and v1alpha1 (neither).
template <bool kV1, typename Device>
DeviceHealth FromWireDevice(const Device& d) {
  DeviceHealth out;
  out.pool = d.device().pool_name();
  out.device = d.device().device_name();
  out.health = FromWire(d.health());
  if constexpr (kV1) {
    if (d.health_check_timeout_seconds() > 0) {
      out.timeout = std::chrono::seconds(d.health_check_timeout_seconds());
    }
    out.message = d.message().substr(0, kMaxMessage);
  }
  return out;
}

}  // namespace

std::string PickHealthService(const std::vector<std::string>& supported) {
  for (std::string_view wanted : {kHealthV1, kHealthV1alpha1}) {
    if (std::find(supported.begin(), supported.end(), wanted) != supported.end()) {
      return std::string(wanted);
    }
  }
  return "";
}

std::string_view HealthName(DeviceHealthStatus health) {
  switch (health) {
    case DeviceHealthStatus::kHealthy:
      return "Healthy";
    case DeviceHealthStatus::kUnhealthy:
      return "Unhealthy";
    case DeviceHealthStatus::kUnknown:
      break;
  }
  return "Unknown";
}

std::chrono::milliseconds DraHealthCache::TimeoutOf(const DeviceHealth& d) const {
  if (d.timeout.count() > 0) return d.timeout;
  return default_timeout_.count() > 0 ? default_timeout_ : kDefaultHealthTimeout;
}

void DraHealthCache::Update(const std::string& driver, std::vector<DeviceHealth> reported,
                            Clock::time_point now) {
  std::lock_guard lock(mu_);
  std::map<std::string, DeviceHealth>& devices = drivers_[driver];
  std::map<std::string, DeviceHealth> fresh;
  for (DeviceHealth& d : reported) {
    d.last_updated = now;
    fresh[d.pool + "/" + d.device] = std::move(d);
  }
  // Devices left out of this report keep their entry until their timeout, then turn Unknown.
  for (auto& [key, d] : devices) {
    if (fresh.contains(key)) continue;
    if (d.health != DeviceHealthStatus::kUnknown && now - d.last_updated > TimeoutOf(d)) {
      d.health = DeviceHealthStatus::kUnknown;
      d.message.clear();
      d.last_updated = now;
    }
  }
  for (auto& [key, d] : fresh) devices[key] = std::move(d);
}

DeviceHealth DraHealthCache::Get(const std::string& driver, const std::string& pool,
                                 const std::string& device, Clock::time_point now) const {
  DeviceHealth unknown;
  unknown.pool = pool;
  unknown.device = device;
  std::lock_guard lock(mu_);
  auto drv = drivers_.find(driver);
  if (drv == drivers_.end()) return unknown;
  auto d = drv->second.find(pool + "/" + device);
  if (d == drv->second.end() || now - d->second.last_updated > TimeoutOf(d->second)) {
    return unknown;
  }
  return d->second;
}

void DraHealthCache::ClearDriver(const std::string& driver) {
  std::lock_guard lock(mu_);
  drivers_.erase(driver);
}

// One driver's stream on one plugin: a thread that watches, and on an end other than
// Unimplemented or a cancel, watches again after the retry period.
class DraHealthStreams::Stream {
 public:
  Stream(std::string driver, HealthTarget target, DraHealthCache* cache,
         std::shared_ptr<spdlog::logger> log, std::chrono::milliseconds retry)
      : driver_(std::move(driver)),
        target_(std::move(target)),
        cache_(cache),
        log_(std::move(log)),
        retry_(retry),
        thread_([this] { Run(); }) {}

  ~Stream() {
    {
      std::lock_guard lock(mu_);
      cancelled_ = true;
      if (context_ != nullptr) context_->TryCancel();
    }
    wake_.notify_all();
    thread_.join();
    cache_->ClearDriver(driver_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  const HealthTarget& target() const { return target_; }

 private:
  void Run() {
    // A channel of its own: a shared subchannel to a plugin that restarted on the same path
    // fails its first call.
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto channel = grpc::CreateCustomChannel("unix:" + target_.endpoint,
                                             grpc::InsecureChannelCredentials(), args);
    while (true) {
      const grpc::Status s = target_.service == kHealthV1
                                 ? Watch<::v1::DRAResourceHealth, true>(channel)
                                 : Watch<::v1alpha1::DRAResourceHealth, false>(channel);
      cache_->ClearDriver(driver_);  // HandleWatchResourcesStream's deferred clearDriver
      std::unique_lock lock(mu_);
      if (cancelled_) return;
      if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
        log_->info("DRA plugin {} at {} does not serve {}: no device health", driver_,
                   target_.endpoint, target_.service);
        return;
      }
      log_->info("DRA health stream of {} ended ({}); again in {} ms", driver_, s.error_message(),
                 retry_.count());
      if (wake_.wait_for(lock, retry_, [this] { return cancelled_; })) return;
    }
  }

  template <typename Service, bool kV1>
  grpc::Status Watch(const std::shared_ptr<grpc::Channel>& channel) {
    auto stub = Service::NewStub(channel);
    grpc::ClientContext context;
    {
      std::lock_guard lock(mu_);
      if (cancelled_) return grpc::Status::CANCELLED;
      context_ = &context;
    }
    auto reader = stub->NodeWatchResources(&context, {});
    grpc::Status status = Drain<kV1>(*reader);
    std::lock_guard lock(mu_);
    context_ = nullptr;
    return status;
  }

  template <bool kV1, typename Response>
  grpc::Status Drain(grpc::ClientReader<Response>& reader) {
    Response response;
    while (reader.Read(&response)) {
      std::vector<DeviceHealth> devices;
      for (const auto& d : response.devices()) devices.push_back(FromWireDevice<kV1>(d));
      cache_->Update(driver_, std::move(devices), DraHealthCache::Clock::now());
    }
    return reader.Finish();
  }

  const std::string driver_;
  const HealthTarget target_;
  DraHealthCache* const cache_;
  std::shared_ptr<spdlog::logger> log_;
  const std::chrono::milliseconds retry_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool cancelled_ = false;                  // guarded by mu_
  grpc::ClientContext* context_ = nullptr;  // guarded by mu_; the open stream's
  std::thread thread_;                      // last: it runs on the members above
};

DraHealthStreams::DraHealthStreams(DraHealthCache* cache, std::shared_ptr<spdlog::logger> log,
                                   std::chrono::milliseconds retry)
    : cache_(cache), log_(std::move(log)), retry_(retry) {}

DraHealthStreams::~DraHealthStreams() { StopAll(); }

void DraHealthStreams::Follow(const std::string& driver,
                              const std::optional<HealthTarget>& newest) {
  std::lock_guard lock(mu_);
  auto it = streams_.find(driver);
  if (it != streams_.end() && newest && it->second->target() == *newest) return;
  // The old stream is cancelled, joined and its entries cleared before a new one reports.
  if (it != streams_.end()) streams_.erase(it);
  if (newest && !newest->service.empty()) {
    streams_[driver] = std::make_unique<Stream>(driver, *newest, cache_, log_, retry_);
  }
}

void DraHealthStreams::StopAll() {
  std::map<std::string, std::unique_ptr<Stream>> all;
  {
    std::lock_guard lock(mu_);
    all.swap(streams_);
  }
  all.clear();
}

}  // namespace neuron::sim
