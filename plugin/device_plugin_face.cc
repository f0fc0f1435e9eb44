#include "plugin/device_plugin_face.h"

#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "core/base/component_log.h"
#include "core/base/path_component.h"
#include "core/base/unique_fd.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "fmt/format.h"
#include "plugin/resource_server.h"
#include "proto/pod_resources.h"

namespace neuron::plugin {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::string_view kKubeletSocket = "kubelet.sock";
constexpr milliseconds kFirstBackoff{50};
constexpr milliseconds kMaxBackoff{5000};
// The kubelet's restarts are inotify events on its directory; the check behind them runs each
// second until the directory is watched, then every 10 s as a safety net under a lost event.
constexpr milliseconds kPeriodicCheck{1000};
constexpr milliseconds kWatchedCheck{10000};
// While nothing we advertise is held, there is nothing PodResources could show us released: the
// next holding comes by our own Allocate, which wakes the refresh (Run). Until then the kubelet is
// asked this often, a safety net.
constexpr milliseconds kPodResourcesIdle{30000};
// The kubelet dials back with a 10 s timeout inside Register (docs/kubelet-api.md#registration);
// allow for it.
constexpr std::chrono::seconds kRegisterDeadline{15};
// Signals of one kubelet restart arrive together; count them as one restart.
constexpr std::chrono::seconds kRestartEpisode{2};

ino_t InodeOf(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

std::string Hostname() {
  std::array<char, 256> buf{};
  if (::gethostname(buf.data(), buf.size() - 1) != 0) return "local";
  return buf.data();
}

}  // namespace

std::string SocketName(Resource r, const std::string& suffix) {
  return fmt::format("{}-{}.sock", ShortName(r), suffix);
}

class DevicePluginFace::Impl {
 public:
  Impl(Config config, NodeState* state, NodeWatcher* watcher, Metrics* metrics)
      : config_(std::move(config)),
        log_(ComponentLogger("plugin")),
        state_(*state),
        watcher_(*watcher),
        metrics_(*metrics),
        plugin_dir_(fs::path(config_.kubelet_dir) / "device-plugins"),
        kubelet_sock_((plugin_dir_ / kKubeletSocket).string()) {}

  ~Impl() { Stop(); }

  absl::Status Start() {
    state_.AddListener([this](const std::shared_ptr<const NodeView>& view) { OnView(view); });
    if (absl::Status s = watcher_.Start(); !s.ok()) return s;

    suffix_ = config_.socket_suffix;
    if (suffix_.empty()) suffix_ = watcher_.instance_id();  // checked by discovery
    if (suffix_.empty()) suffix_ = Hostname();
    // The suffix names files we remove below: whatever its source, it stays one path component.
    if (absl::Status s = CheckPathComponent("socket suffix", suffix_); !s.ok()) return s;
    std::error_code ec;
    fs::create_directories(plugin_dir_, ec);  // the kubelet makes it; we need it to bind
    std::unique_lock<std::mutex> servers_lock(servers_mu_);  // OnView may already run
    for (Resource r : kAllResources) {
      Slot& slot = slots_[r];
      slot.resource = r;
      slot.socket_path = (plugin_dir_ / SocketName(r, suffix_)).string();
      if (slot.socket_path.size() >= 108) {
        return absl::InvalidArgumentError(fmt::format(
            "socket path {} is {} bytes; Unix sockets allow 107: use a shorter --kubelet-dir",
            slot.socket_path, slot.socket_path.size()));
      }
      // Only our own stale sockets: the names carry our resource and instance.
      if (fs::remove(slot.socket_path, ec)) log_->info("removed stale socket {}", slot.socket_path);
    }
    servers_lock.unlock();
    Publish(*state_.view());
    inotify_fd_.Reset(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
    wake_fd_.Reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!inotify_fd_.valid() || !wake_fd_.valid()) {
      return absl::ResourceExhaustedError(
          "inotify_init1/eventfd failed: consider raising fs.inotify.max_user_instances");
    }
    ArmWatch();

    PodResourcesCache::Options popts;
    popts.socket_path = (fs::path(config_.kubelet_dir) / "pod-resources" / kKubeletSocket).string();
    popts.period = config_.podresources_period;
    popts.on_answer = [this](const std::shared_ptr<const PodAssignments>& a, bool /*changed*/) {
      // Every answer, changed or not: one that does not show a pending holding ages it.
      state_.SetPodAssignments(*a, Clock::now());
      const bool idle = HeldDevices(*state_.view()).empty();
      pod_resources_idle_ = idle;
      return idle ? kPodResourcesIdle : config_.podresources_period;
    };
    pod_resources_ = std::make_unique<PodResourcesCache>(popts);

    thread_ = std::thread([this] { Run(); });
    return absl::OkStatus();
  }

  void Stop() {
    if (stopped_.exchange(true)) return;
    if (thread_.joinable()) {
      Wake();
      thread_.join();
    }
    for (auto& [r, slot] : slots_) DropServer(slot);
    pod_resources_.reset();
    inotify_fd_.Reset();
    wake_fd_.Reset();
  }

  bool Ready() const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [r, s] : status_) {
      if (s.active && !s.registered) return false;
    }
    return true;
  }

  std::string ReadyDetail() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out;
    for (Resource r : kAllResources) {
      if (!config_.enabled(r)) continue;
      const auto it = status_.find(r);
      const PublicStatus s = it == status_.end() ? PublicStatus{} : it->second;
      out += fmt::format("{} {} {}\n", ResourceName(r),
                         !s.active      ? "idle (no devices)"
                         : s.registered ? "registered"
                                        : "waiting",
                         SocketName(r, suffix_));
    }
    return out;
  }

 private:
  struct Slot {
    Resource resource = Resource::kNeuron;
    std::string socket_path;
    std::unique_ptr<ResourceServer> server;  // replaced only under servers_mu_
    bool registered = false;
    bool want_register = false;
    Clock::time_point next_attempt;
    milliseconds backoff = kFirstBackoff;
    Clock::time_point registered_at;
    ino_t kubelet_inode = 0;
    int failures = 0;
  };
  struct PublicStatus {
    bool active = false;
    bool registered = false;
  };

  void Wake() {
    const uint64_t one = 1;
    if (wake_fd_.valid()) (void)!::write(wake_fd_.get(), &one, sizeof(one));
  }

  void ArmWatch() {
    std::error_code ec;
    fs::create_directories(plugin_dir_, ec);
    watch_ = ::inotify_add_watch(
        inotify_fd_.get(), plugin_dir_.c_str(),
        IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF);
    if (watch_ < 0) log_->warn("cannot watch {}: {}", plugin_dir_.string(), std::strerror(errno));
  }

  // Any thread: a newer view goes to every server's streams and to the gauges; the lifecycle
  // thread re-checks which resources have devices.
  void OnView(const std::shared_ptr<const NodeView>& view) {
    metrics_.SetView(*view);
    {
      std::lock_guard<std::mutex> lock(servers_mu_);
      for (auto& [r, slot] : slots_) {
        if (slot.server) slot.server->OnView(view);
      }
    }
    Wake();
  }

  void OnStreamEnd(Resource r, Clock::time_point started) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ended_streams_.emplace_back(r, started);
    }
    Wake();
  }

  void RestartSeen(std::string_view signal) {
    const Clock::time_point now = Clock::now();
    if (now - last_restart_ > kRestartEpisode) {
      metrics_.KubeletRestart(signal);
      log_->info("kubelet restart seen ({}): re-registering", signal);
    }
    last_restart_ = now;
  }

  void WantRegister(Slot& slot, bool now) {
    slot.want_register = true;
    slot.registered = false;
    if (now) {
      slot.backoff = kFirstBackoff;
      slot.next_attempt = Clock::now();
    }
  }

  void DrainInotify() {
    alignas(inotify_event) std::array<char, 8192> buf;
    while (true) {
      const ssize_t n = ::read(inotify_fd_.get(), buf.data(), buf.size());
      if (n <= 0) return;
      for (ssize_t off = 0; off < n;) {
        const auto* ev = reinterpret_cast<const inotify_event*>(buf.data() + off);
        off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
        const std::string name = ev->len > 0 ? std::string(ev->name) : std::string();
        if (ev->mask & (IN_Q_OVERFLOW | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) {
          force_check_ = true;
          if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) watch_ = -1;
          continue;
        }
        if (name == kKubeletSocket && (ev->mask & (IN_CREATE | IN_MOVED_TO))) {
          RestartSeen("kubelet_sock_created");
          // A slot that already registered with this very kubelet.sock (its deletion of our
          // socket came first and was handled) needs no second registration.
          const ino_t inode = InodeOf(kubelet_sock_);
          for (auto& [r, slot] : slots_) {
            if (!(slot.registered && inode != 0 && slot.kubelet_inode == inode)) {
              WantRegister(slot, true);
            }
          }
          continue;
        }
        if (!(ev->mask & (IN_DELETE | IN_MOVED_FROM))) continue;
        for (auto& [r, slot] : slots_) {
          if (slot.server && fs::path(slot.socket_path).filename() == name &&
              !slot.server->SocketPresent()) {
            RestartSeen("socket_deleted");
            WantRegister(slot, true);
          }
        }
      }
    }
  }

  // Destroys a slot's server outside servers_mu_: shutting down waits for running RPCs, and an
  // Allocate's view change calls OnView, which takes servers_mu_.
  void DropServer(Slot& slot) {
    std::unique_ptr<ResourceServer> old;
    {
      std::lock_guard<std::mutex> lock(servers_mu_);
      old = std::move(slot.server);
    }
    old.reset();
    slot.registered = false;
  }

  bool EnsureServer(Slot& slot) {
    if (slot.server && slot.server->SocketPresent()) return true;
    if (slot.server) {
      log_->info("{}: socket {} is gone; serving again", ResourceName(slot.resource),
                 slot.socket_path);
      DropServer(slot);
      WantRegister(slot, true);
    }
    ResourceServer::Options o{
        .resource = slot.resource,
        .root = config_.root,
        .socket_path = slot.socket_path,
        .noncontiguous = config_.noncontiguous,
        .cdi = config_.cdi,
        .device_numbering = config_.device_numbering,
        .state = &state_,
        .metrics = &metrics_,
        .on_stream_end = [this](Resource r, Clock::time_point t) { OnStreamEnd(r, t); }};
    absl::StatusOr<std::unique_ptr<ResourceServer>> server = ResourceServer::Start(o);
    if (!server.ok()) {
      log_->warn("{}", std::string{server.status().message()});
      return false;
    }
    {
      std::lock_guard<std::mutex> lock(servers_mu_);
      slot.server = *std::move(server);
      slot.server->OnView(state_.view());
    }
    WantRegister(slot, true);
    return true;
  }

  void Register(Slot& slot) {
    const Clock::time_point start = Clock::now();
    slot.next_attempt = start + slot.backoff;
    slot.backoff = std::min(slot.backoff * 2, kMaxBackoff);
    const ino_t inode = InodeOf(kubelet_sock_);
    if (inode == 0) return;  // no kubelet yet: inotify tells us when it comes
    auto channel = grpc::CreateChannel("unix:" + kubelet_sock_, grpc::InsecureChannelCredentials());
    auto stub = v1beta1::Registration::NewStub(channel);
    v1beta1::RegisterRequest req;
    req.set_version("v1beta1");
    req.set_endpoint(fs::path(slot.socket_path).filename().string());
    req.set_resource_name(std::string(ResourceName(slot.resource)));
    req.mutable_options()->set_get_preferred_allocation_available(true);
    v1beta1::Empty resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kRegisterDeadline);
    const grpc::Status s = stub->Register(&ctx, req, &resp);
    metrics_.Registration(slot.resource, s.ok());
    if (!s.ok()) {
      ++slot.failures;
      const auto level = slot.failures <= 3 ? spdlog::level::warn : spdlog::level::debug;
      log_->log(level, "{}: Register failed ({}), retrying in {} ms", ResourceName(slot.resource),
                s.error_message(), (slot.next_attempt - Clock::now()) / milliseconds(1));
      return;
    }
    slot.registered = true;
    slot.want_register = false;
    slot.failures = 0;
    slot.backoff = kFirstBackoff;
    slot.registered_at = start;
    slot.kubelet_inode = inode;
    {
      std::lock_guard<std::mutex> lock(mu_);
      status_[slot.resource].registered = true;
    }
    log_->info("{}: registered with the kubelet as {} in {} ms", ResourceName(slot.resource),
               req.endpoint(),
               std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }

  void PeriodicCheck() {
    if (watch_ < 0) ArmWatch();
    const ino_t kubelet = InodeOf(kubelet_sock_);
    for (auto& [r, slot] : slots_) {
      if (!slot.server) continue;
      if (!slot.server->SocketPresent()) {
        RestartSeen("periodic_check");
        WantRegister(slot, true);  // EnsureServer re-creates it first
        continue;
      }
      if (slot.registered && kubelet != 0 && kubelet != slot.kubelet_inode) {
        RestartSeen("periodic_check");
        WantRegister(slot, true);
      }
    }
  }

  void Run() {
    Clock::time_point next_check = Clock::now();
    while (!stopped_) {
      DrainInotify();
      {
        uint64_t v;
        while (::read(wake_fd_.get(), &v, sizeof(v)) > 0) {
        }
      }
      std::vector<std::pair<Resource, Clock::time_point>> ended;
      {
        std::lock_guard<std::mutex> lock(mu_);
        ended.swap(ended_streams_);
      }
      for (const auto& [r, started] : ended) {
        Slot& slot = slots_[r];
        // A stream of an earlier registration ends when the kubelet replaces the endpoint;
        // only the current one's end means the kubelet lost us.
        if (slot.registered && started >= slot.registered_at) {
          RestartSeen("stream_ended");
          WantRegister(slot, false);
        }
      }
      if (force_check_ || Clock::now() >= next_check) {
        force_check_ = false;
        PeriodicCheck();
        next_check = Clock::now() + (watch_ < 0 ? kPeriodicCheck : kWatchedCheck);
      }
      const std::shared_ptr<const NodeView> view = state_.view();
      // An Allocate made a holding while the refresh waits its idle period: refresh now, and
      // every podresources_period from then on, so that its release is seen.
      if (pod_resources_idle_ && !HeldDevices(*view).empty()) {
        pod_resources_idle_ = false;
        pod_resources_->RefreshSoon();
      }
      Clock::time_point wake_at = next_check;
      for (auto& [r, slot] : slots_) {
        const bool active = config_.enabled(r) && !view->Get(r).devices.empty();
        // A registered server's socket is looked at when something says it went (inotify, a
        // stream's end, the periodic check: each wants a registration), not on every pass.
        const bool look = !slot.server || slot.want_register;
        if (active && look && EnsureServer(slot) && slot.want_register) {
          if (Clock::now() >= slot.next_attempt) Register(slot);
          if (slot.want_register) wake_at = std::min(wake_at, slot.next_attempt);
        }
        if (!active && !slot.server) continue;
        if (!slot.server) wake_at = std::min(wake_at, Clock::now() + kFirstBackoff * 10);
      }
      Publish(*view);
      if (stopped_) break;
      const auto timeout = std::max<int64_t>(0, (wake_at - Clock::now()) / milliseconds(1));
      std::array<pollfd, 2> fds{{{inotify_fd_.get(), POLLIN, 0}, {wake_fd_.get(), POLLIN, 0}}};
      ::poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(timeout, 1000)));
    }
  }

  void Publish(const NodeView& view) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [r, slot] : slots_) {
      status_[r] =
          PublicStatus{config_.enabled(r) && !view.Get(r).devices.empty(), slot.registered};
    }
  }

  const Config config_;
  std::shared_ptr<spdlog::logger> log_;
  NodeState& state_;
  NodeWatcher& watcher_;
  Metrics& metrics_;
  const fs::path plugin_dir_;
  const std::string kubelet_sock_;
  std::string suffix_;
  std::unique_ptr<PodResourcesCache> pod_resources_;
  std::thread thread_;
  std::atomic<bool> stopped_{false};
  UniqueFd inotify_fd_;
  UniqueFd wake_fd_;

  // Lifecycle thread only (and Start/Stop around it).
  std::map<Resource, Slot> slots_;
  int watch_ = -1;
  bool force_check_ = false;
  Clock::time_point last_restart_;
  // The PodResources refresh waits kPodResourcesIdle (set by its thread, read by Run's).
  std::atomic<bool> pod_resources_idle_{false};

  mutable std::mutex servers_mu_;  // guards Slot::server against OnView
  mutable std::mutex mu_;
  std::map<Resource, PublicStatus> status_;                            // guarded by mu_
  std::vector<std::pair<Resource, Clock::time_point>> ended_streams_;  // guarded by mu_
};

DevicePluginFace::DevicePluginFace(Config config, NodeState* state, NodeWatcher* watcher,
                                   Metrics* metrics)
    : state_(state), impl_(std::make_unique<Impl>(std::move(config), state, watcher, metrics)) {}
DevicePluginFace::~DevicePluginFace() = default;
std::set<int> DevicePluginFace::DevicesInUse() const { return HeldDevices(*state_->view()); }
absl::Status DevicePluginFace::Start() { return impl_->Start(); }
void DevicePluginFace::Stop() { impl_->Stop(); }
bool DevicePluginFace::Ready() const { return impl_->Ready(); }
std::string DevicePluginFace::ReadyDetail() const { return impl_->ReadyDetail(); }

}  // namespace neuron::plugin
