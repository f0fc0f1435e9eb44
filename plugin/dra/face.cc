#include "plugin/dra/face.h"

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
                     .partitionable = config_.dra_partitionable},
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(now).count()));
    state_.AddListener([this](const std::shared_ptr<const NodeView>& view) { OnView(view); });
    if (absl::Status s = watcher_.Start(); !s.ok()) return s;
    slice_->Update(*state_.view());  // the first scan is done: the slice is served from now on
    claims_ = std::make_unique<HttpClaimSource>(config_.dra_claims);
    absl::StatusOr<std::unique_ptr<Driver>> driver = Driver::Create(
        {.node_name = config_.node_name,
         .cdi_dir = config_.cdi_dir,
         .checkpoint_dir = fs::path(config_.kubelet_dir) / "plugins" / std::string(kDriverName),
         .state = &state_,
         .claims = claims_.get()});
    if (!driver.ok()) return driver.status();
    driver_ = *std::move(driver);
    if (absl::Status s = Serve(); !s.ok()) return s;
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
    server_.reset();
  }

  bool Ready() const {
    std::lock_guard<std::mutex> lock(server_mu_);
    return server_ != nullptr && server_->registered();
  }

  std::string ReadyDetail() const {
    return fmt::format("{} (DRA) {} {}\n", kDriverName, Ready() ? "registered" : "waiting",
                       RegistrationSocketPath(config_.kubelet_dir, config_.pod_uid));
  }

  const Config& config() const { return config_; }

  SliceState::Document Slice(std::optional<uint64_t> unless) const {
    if (slice_ == nullptr) return {503, "the node has not been scanned yet\n"};
    return slice_->Get(unless);
  }

 private:
  absl::Status Serve() {
    {
      std::lock_guard<std::mutex> lock(server_mu_);
      server_.reset();  // first: the new one binds the same paths
    }
    absl::StatusOr<std::unique_ptr<Server>> server =
        Server::Start({.kubelet_dir = config_.kubelet_dir,
                       .node_name = config_.node_name,
                       .driver = driver_.get(),
                       .state = &state_,
                       .partitionable = config_.dra_partitionable,
                       .stale_after = config_.health.stale_after,
                       .pod_uid = config_.pod_uid});
    if (!server.ok()) return server.status();
    std::lock_guard<std::mutex> lock(server_mu_);
    server_ = *std::move(server);
    return absl::OkStatus();
  }

  void OnView(const std::shared_ptr<const NodeView>& view) {
    if (slice_) slice_->Update(*view);
    std::lock_guard<std::mutex> lock(server_mu_);
    if (server_) server_->OnView(view);
  }

  // The kubelet's plugin watcher registers what appears in plugins_registry; a socket deleted
  // (a person, a clean-up of the directory) is served again so that it reappears.
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopped_) {
      cv_.wait_for(lock, kPeriodicCheck, [this] { return stopped_.load(); });
      if (stopped_) break;
      SayWhetherStale();
      bool present = false;
      {
        std::lock_guard<std::mutex> server_lock(server_mu_);
        present = server_ != nullptr && server_->SocketsPresent();
      }
      if (present) continue;
      log_->info("a DRA socket is gone: serving again");
      if (absl::Status s = Serve(); !s.ok()) log_->warn("{}", std::string{s.message()});
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
  std::unique_ptr<Driver> driver_;
  std::thread thread_;
  std::atomic<bool> stopped_{false};
  bool stale_ = false;  // Run's
  std::mutex mu_;
  std::condition_variable cv_;
  mutable std::mutex server_mu_;    // guards server_ against OnView and Ready
  std::unique_ptr<Server> server_;  // guarded by server_mu_
};

DraFace::DraFace(Config config, NodeState* state, NodeWatcher* watcher)
    : impl_(std::make_unique<Impl>(std::move(config), state, watcher)) {}
DraFace::~DraFace() = default;
absl::Status DraFace::Start() { return impl_->Start(); }
void DraFace::Stop() { impl_->Stop(); }
bool DraFace::Ready() const { return impl_->Ready(); }
std::string DraFace::ReadyDetail() const { return impl_->ReadyDetail(); }
absl::Status DraFace::Live() const {
  return ProbeSockets(impl_->config().kubelet_dir, impl_->config().pod_uid);
}
SliceState::Document DraFace::Slice(std::optional<uint64_t> unless) const {
  return impl_->Slice(unless);
}

}  // namespace neuron::plugin::dra
