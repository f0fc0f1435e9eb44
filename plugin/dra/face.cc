#include "plugin/dra/face.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "core/base/component_log.h"
#include "core/base/version.h"
#include "fmt/format.h"
#include "plugin/dra/claim_source.h"
#include "plugin/dra/driver.h"
#include "plugin/dra/server.h"

namespace neuron::plugin::dra {
namespace {

namespace fs = std::filesystem;

// How often the sockets are checked for presence (the kubelet registers what appears).
constexpr std::chrono::milliseconds kPeriodicCheck{1000};

}  // namespace

class DraFace::Impl {
 public:
  Impl(Config config, NodeState* state, NodeWatcher* watcher)
      : config_(std::move(config)),
        log_(ComponentLogger("plugin")),
        state_(*state),
        watcher_(*watcher) {}

  ~Impl() { Stop(); }

  absl::Status Start() {
    absl::StatusOr<TaintEffect> effect = ParseTaintEffect(config_.dra_taint_effect);
    if (!effect.ok()) return effect.status();
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    slice_ = std::make_unique<SliceState>(
        SliceOptions{.node_name = config_.node_name,
                     .dra_driver_version = std::string(AgentVersion()),
                     .taint_effect = *effect,
                     .partitionable = config_.dra_partitionable,
                     .efa = config_.dra_efa},
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(now).count()));
    state_.AddListener([this](const std::shared_ptr<const NodeView>& view) { OnView(view); });
    if (absl::Status s = watcher_.Start(); !s.ok()) return s;
    slice_->Update(*state_.view());  // the first scan is done: the slice is served from now on
    claims_ = std::make_unique<HttpClaimSource>(config_.dra_claims);
    // neuron.aws.com first: efa.neuron.aws.com looks at what it holds (DriverOptions::peer).
    for (std::string_view name : kDriverNames) {
      if (name == kEfaDriverName && !config_.dra_efa) continue;
      absl::StatusOr<std::unique_ptr<Driver>> driver = Driver::Create(
          {.node_name = config_.node_name,
           .cdi_dir = config_.cdi_dir,
           .checkpoint_dir = fs::path(config_.kubelet_dir) / "plugins" / std::string(name),
           .state = &state_,
           .claims = claims_.get(),
           .driver_name = name,
           .peer = planes_.empty() ? nullptr : planes_.front().driver.get(),
           .root = config_.root});
      if (!driver.ok()) return driver.status();
      planes_.push_back({.name = name, .driver = *std::move(driver), .server = nullptr});
    }
    for (Plane& p : planes_) {
      if (absl::Status s = Serve(p); !s.ok()) return s;
    }
    thread_ = std::thread([this] { Run(); });
    return absl::OkStatus();
  }

  void Stop() {
    if (stopped_.exchange(true)) return;
    {
      std::lock_guard<std::mutex> lock(mu_);  // so Run cannot miss the wake-up
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    std::lock_guard<std::mutex> lock(server_mu_);
    for (Plane& p : planes_) p.server.reset();
  }

  bool Ready() const {
    std::lock_guard<std::mutex> lock(server_mu_);
    return !planes_.empty() && std::all_of(planes_.begin(), planes_.end(), [](const Plane& p) {
      return p.server != nullptr && p.server->registered();
    });
  }

  std::string ReadyDetail() const {
    std::lock_guard<std::mutex> lock(server_mu_);
    std::string out;
    for (const Plane& p : planes_) {
      const bool registered = p.server != nullptr && p.server->registered();
      out += fmt::format("{} (DRA) {} {}\n", p.name, registered ? "registered" : "waiting",
                         RegistrationSocketPath(config_.kubelet_dir, config_.pod_uid, p.name));
    }
    return out;
  }

  // Each driver's sockets answer, as the kubelet calls them.
  absl::Status Live() const {
    for (const Plane& p : planes_) {
      if (absl::Status s = ProbeSockets(config_.kubelet_dir, config_.pod_uid, p.name); !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }

  std::set<int> DevicesInUse() const {
    const std::shared_ptr<const NodeView> view = state_.view();
    std::set<int> out;
    for (const Plane& p : planes_) {
      for (const auto& [uid, claim] : p.driver->prepared()) {
        out.merge(NeuronDevicesOf(claim.devices, *view));
      }
    }
    return out;
  }

  SliceState::Document Slice(std::optional<uint64_t> unless) const {
    if (slice_ == nullptr) return {503, "the node has not been scanned yet\n"};
    return slice_->Get(unless);
  }

 private:
  // One driver of ours: its prepare and its kubelet sockets.
  struct Plane {
    std::string_view name;
    std::unique_ptr<Driver> driver;
    std::unique_ptr<Server> server;  // guarded by server_mu_
  };

  absl::Status Serve(Plane& plane) {
    {
      std::lock_guard<std::mutex> lock(server_mu_);
      plane.server.reset();  // first: the new one binds the same paths
    }
    absl::StatusOr<std::unique_ptr<Server>> server =
        Server::Start({.driver_name = plane.name,
                       .kubelet_dir = config_.kubelet_dir,
                       .node_name = config_.node_name,
                       .driver = plane.driver.get(),
                       .state = &state_,
                       .partitionable = config_.dra_partitionable,
                       .stale_after = config_.health.stale_after,
                       .pod_uid = config_.pod_uid});
    if (!server.ok()) return server.status();
    std::lock_guard<std::mutex> lock(server_mu_);
    plane.server = *std::move(server);
    return absl::OkStatus();
  }

  void OnView(const std::shared_ptr<const NodeView>& view) {
    if (slice_) slice_->Update(*view);
    std::lock_guard<std::mutex> lock(server_mu_);
    for (Plane& p : planes_) {
      if (p.server) p.server->OnView(view);
    }
  }

  // The kubelet's plugin watcher registers what appears in plugins_registry; a socket deleted
  // (a person, a clean-up of the directory) is served again so that it reappears.
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopped_) {
      cv_.wait_for(lock, kPeriodicCheck, [this] { return stopped_.load(); });
      if (stopped_) break;
      SayWhetherStale();
      for (Plane& p : planes_) {
        bool present = false;
        {
          std::lock_guard<std::mutex> server_lock(server_mu_);
          present = p.server != nullptr && p.server->SocketsPresent();
        }
        if (present) continue;
        log_->info("a DRA socket of {} is gone: serving again", p.name);
        if (absl::Status s = Serve(p); !s.ok()) log_->warn("{}", std::string{s.message()});
      }
    }
  }

  // Once when the health evidence goes stale (the health streams stop sending it) and once when
  // it is read again.
  void SayWhetherStale() {
    const auto read = state_.evidence_time();
    const bool stale =
        read && std::chrono::system_clock::now() - *read > config_.health.stale_after;
    if (stale == stale_) return;
    stale_ = stale;
    if (stale) {
      log_->error(
          "the node's health evidence was last read {} s ago (health.stale_after {} s): the "
          "health streams stop sending it, and the kubelet takes the devices as Unknown",
          std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now() - *read)
              .count(),
          config_.health.stale_after.count() / 1000.0);
    } else {
      log_->info("the node's health evidence is read again: the health streams send it");
    }
  }

  const Config config_;
  std::shared_ptr<spdlog::logger> log_;
  NodeState& state_;
  NodeWatcher& watcher_;
  std::unique_ptr<SliceState> slice_;
  std::unique_ptr<ClaimSource> claims_;
  std::vector<Plane> planes_;  // set by Start; each server guarded by server_mu_
  std::thread thread_;
  std::atomic<bool> stopped_{false};
  bool stale_ = false;  // Run's
  std::mutex mu_;
  std::condition_variable cv_;
  mutable std::mutex server_mu_;  // guards the planes' servers against OnView and Ready
};

DraFace::DraFace(Config config, NodeState* state, NodeWatcher* watcher)
    : impl_(std::make_unique<Impl>(std::move(config), state, watcher)) {}
DraFace::~DraFace() = default;
absl::Status DraFace::Start() { return impl_->Start(); }
void DraFace::Stop() { impl_->Stop(); }
bool DraFace::Ready() const { return impl_->Ready(); }
std::string DraFace::ReadyDetail() const { return impl_->ReadyDetail(); }
absl::Status DraFace::Live() const { return impl_->Live(); }
std::set<int> DraFace::DevicesInUse() const { return impl_->DevicesInUse(); }

SliceState::Document DraFace::Slice(std::optional<uint64_t> unless) const {
  return impl_->Slice(unless);
}

}  // namespace neuron::plugin::dra
