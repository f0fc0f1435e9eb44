#include "core/events/events.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "core/base/component_log.h"
#include "core/events/internal/node_watch.h"

namespace neuron {
namespace {

using Clock = std::chrono::steady_clock;
using events_internal::NodeWatch;
using events_internal::Presence;
using events_internal::Uevent;

spdlog::logger& EventsLog() {
  static std::shared_ptr<spdlog::logger> log = ComponentLogger("events");
  return *log;
}

}  // namespace

std::string_view EventKindName(EventKind kind) {
  switch (kind) {
    case EventKind::kDeviceAdded:
      return "DeviceAdded";
    case EventKind::kDeviceRemoved:
      return "DeviceRemoved";
    case EventKind::kDeviceStateChanged:
      return "DeviceStateChanged";
    case EventKind::kEfaAdded:
      return "EfaAdded";
    case EventKind::kEfaRemoved:
      return "EfaRemoved";
    case EventKind::kEfaPortStateChanged:
      return "EfaPortStateChanged";
    case EventKind::kHardwareError:
      return "HardwareError";
    case EventKind::kDeviceReset:
      return "DeviceReset";
  }
  return "Unknown";
}

class Events::Impl {
 public:
  Impl(const RootPaths& root, EventsOptions options)
      : options_(std::move(options)), watch_(root, options_.mode) {
    if (options_.kmsg_path.empty()) options_.kmsg_path = root.Kmsg();
  }
  ~Impl() { Stop(); }

  SubscriptionId Subscribe(Callback cb) {
    std::lock_guard<std::mutex> lock(mu_);
    const SubscriptionId id = ++next_id_;
    subscribers_[id] = std::make_shared<Callback>(std::move(cb));
    return id;
  }

  void Unsubscribe(SubscriptionId id) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      subscribers_.erase(id);
    }
    // Wait out a delivery in progress, unless we are that delivery.
    if (std::this_thread::get_id() != worker_id_.load()) {
      std::lock_guard<std::mutex> wait(delivery_mu_);
    }
  }

  absl::Status Start();
  void Stop();

 private:
  void Run();
  void Dispatch(std::vector<Event>& events);
  static Event Make(EventKind kind) {
    Event e;
    e.kind = kind;
    e.time = Clock::now();
    return e;
  }
  void Reconcile(const Presence& now, std::vector<Event>* out);
  void PollDeviceStates(std::vector<Event>* out);
  void PollPortStates(std::vector<Event>* out);
  bool DeviceStatesDue(Clock::time_point now) const;
  void ApplyUevents(const std::vector<Uevent>& uevents, std::vector<Event>* out);
  void OpenKmsg(KmsgReader::StartAt start);
  void ReadKmsg(std::vector<Event>* out);

  EventsOptions options_;

  std::mutex mu_;  // guards subscribers_ and next_id_
  std::map<SubscriptionId, std::shared_ptr<Callback>> subscribers_;
  SubscriptionId next_id_ = 0;
  std::mutex delivery_mu_;  // held while callbacks run
  std::atomic<std::thread::id> worker_id_{};

  // Owned by the worker thread between Start() and Stop().
  std::thread thread_;
  std::atomic<bool> running_{false};
  int wake_fd_ = -1;
  NodeWatch watch_;
  std::unique_ptr<KmsgReader> kmsg_;
  bool kmsg_seen_ = false;
  Clock::time_point device_states_read_{};
  Presence known_;
};

absl::Status Events::Impl::Start() {
  if (thread_.joinable()) return absl::FailedPreconditionError("Events already started");
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) return absl::InternalError(fmt::format("eventfd: {}", std::strerror(errno)));
  if (absl::Status s = watch_.Open(); !s.ok()) {
    Stop();
    return s;
  }
  if (options_.watch_kmsg) OpenKmsg(KmsgReader::StartAt::kEnd);
  known_ = watch_.ReadPresence();  // silent snapshot: consumers scan their inventory themselves
  device_states_read_ = Clock::now();
  running_ = true;
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void Events::Impl::Stop() {
  if (thread_.joinable()) {
    running_ = false;
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
    thread_.join();
  }
  if (wake_fd_ >= 0) ::close(wake_fd_);
  wake_fd_ = -1;
  watch_.Close();
  kmsg_.reset();
  kmsg_seen_ = false;
}

void Events::Impl::Dispatch(std::vector<Event>& events) {
  if (events.empty()) return;
  std::lock_guard<std::mutex> delivering(delivery_mu_);
  for (const Event& e : events) {
    std::vector<std::pair<SubscriptionId, std::shared_ptr<Callback>>> subs;
    {
      std::lock_guard<std::mutex> lock(mu_);
      subs.assign(subscribers_.begin(), subscribers_.end());
    }
    for (const auto& [id, cb] : subs) {
      {
        // A callback may have unsubscribed another one during this event.
        std::lock_guard<std::mutex> lock(mu_);
        if (!subscribers_.contains(id)) continue;
      }
      (*cb)(e);
    }
  }
  events.clear();
}

void Events::Impl::Run() {
  worker_id_ = std::this_thread::get_id();
  auto next_poll = Clock::now() + options_.state_poll;
  auto next_rescan = Clock::now() + options_.rescan;
  std::vector<Event> events;
  while (running_) {
    const auto deadline = std::min(next_poll, next_rescan);
    const int timeout_ms = static_cast<int>(std::max<int64_t>(
        0, std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count()));
    pollfd fds[4];
    int nfds = 0;
    fds[nfds++] = {wake_fd_, POLLIN, 0};
    const int ino = watch_.inotify_fd() >= 0 ? nfds : -1;
    if (ino >= 0) fds[nfds++] = {watch_.inotify_fd(), POLLIN, 0};
    const int mon = watch_.monitor_fd() >= 0 ? nfds : -1;
    if (mon >= 0) fds[nfds++] = {watch_.monitor_fd(), POLLIN, 0};
    const int km = kmsg_ && kmsg_->pollable_fd() >= 0 ? nfds : -1;
    if (km >= 0) fds[nfds++] = {kmsg_->pollable_fd(), POLLIN, 0};
    const int rc = ::poll(fds, static_cast<nfds_t>(nfds), timeout_ms);
    if (rc < 0 && errno != EINTR) {
      EventsLog().error("poll: {}", std::strerror(errno));
      std::this_thread::sleep_for(options_.state_poll);
      continue;
    }
    if (!running_) break;
    bool presence_dirty = false;
    bool kmsg_dirty = false;
    if (rc > 0) {
      if (ino >= 0 && (fds[ino].revents & POLLIN)) {
        watch_.DrainInotify(&presence_dirty, &kmsg_dirty);
      }
      if (mon >= 0 && (fds[mon].revents & POLLIN)) ApplyUevents(watch_.DrainMonitor(), &events);
      if (km >= 0 && (fds[km].revents & (POLLIN | POLLERR | POLLHUP))) kmsg_dirty = true;
    }
    const auto now = Clock::now();
    if (now >= next_rescan) {
      presence_dirty = true;
      next_rescan = now + options_.rescan;
    }
    if (presence_dirty) Reconcile(watch_.ReadPresence(known_), &events);
    if (now >= next_poll) {
      // A log that appeared after Start() holds only new records; one we lost holds old ones.
      if (options_.watch_kmsg && !kmsg_) {
        OpenKmsg(kmsg_seen_ ? KmsgReader::StartAt::kEnd : KmsgReader::StartAt::kBeginning);
        kmsg_dirty = kmsg_ != nullptr;
      }
      if (DeviceStatesDue(now)) PollDeviceStates(&events);
      PollPortStates(&events);
      next_poll = now + options_.state_poll;
    }
    if (kmsg_dirty) ReadKmsg(&events);
    Dispatch(events);
  }
  worker_id_ = std::thread::id();
}

void Events::Impl::Reconcile(const Presence& now, std::vector<Event>* out) {
  for (const auto& [index, state] : known_.devices) {
    if (now.devices.contains(index)) continue;
    Event e = Make(EventKind::kDeviceRemoved);
    e.device = index;
    out->push_back(std::move(e));
  }
  for (const auto& [index, state] : now.devices) {
    if (known_.devices.contains(index)) continue;
    Event e = Make(EventKind::kDeviceAdded);
    e.device = index;
    e.state = state;
    out->push_back(std::move(e));
  }
  for (const auto& [name, port] : known_.efas) {
    if (now.efas.contains(name)) continue;
    Event e = Make(EventKind::kEfaRemoved);
    e.efa = name;
    out->push_back(std::move(e));
  }
  for (const auto& [name, port] : now.efas) {
    if (known_.efas.contains(name)) continue;
    Event e = Make(EventKind::kEfaAdded);
    e.efa = name;
    e.port_state = port;
    out->push_back(std::move(e));
  }
  // Devices present in both kept their last known state (ReadPresence); the state polls and the
  // kernel log's reset records report changes.
  known_ = now;
}

// Without the kernel log no reset is announced: every poll reads the states.
bool Events::Impl::DeviceStatesDue(Clock::time_point now) const {
  return !kmsg_ || now - device_states_read_ >= options_.device_state_recheck;
}

void Events::Impl::PollDeviceStates(std::vector<Event>* out) {
  device_states_read_ = Clock::now();
  for (auto& [index, state] : known_.devices) {
    const std::optional<DeviceState> now = watch_.ReadDeviceState(index);
    // Unreadable or malformed: keep the last state; presence handles a vanished device.
    if (!now || now == state) continue;
    state = now;
    Event e = Make(EventKind::kDeviceStateChanged);
    e.device = index;
    e.state = now;
    out->push_back(std::move(e));
  }
}

void Events::Impl::PollPortStates(std::vector<Event>* out) {
  for (auto& [name, port] : known_.efas) {
    const std::optional<std::string> now = watch_.ReadPortState(name);
    if (!now || *now == port) continue;
    port = *now;
    Event e = Make(EventKind::kEfaPortStateChanged);
    e.efa = name;
    e.port_state = *now;
    out->push_back(std::move(e));
  }
}

void Events::Impl::ApplyUevents(const std::vector<Uevent>& uevents, std::vector<Event>* out) {
  for (const Uevent& u : uevents) {
    if (u.neuron) {
      if (!u.add && known_.devices.erase(u.index) > 0) {
        Event e = Make(EventKind::kDeviceRemoved);
        e.device = u.index;
        out->push_back(std::move(e));
      } else if (u.add && !known_.devices.contains(u.index)) {
        Event e = Make(EventKind::kDeviceAdded);
        e.device = u.index;
        e.state = watch_.ReadDeviceState(u.index);
        known_.devices[u.index] = e.state;
        out->push_back(std::move(e));
      }
    } else if (!u.add && known_.efas.erase(u.name) > 0) {
      Event e = Make(EventKind::kEfaRemoved);
      e.efa = u.name;
      out->push_back(std::move(e));
    } else if (u.add && !known_.efas.contains(u.name) && watch_.IsEfaSyspath(u.syspath)) {
      Event e = Make(EventKind::kEfaAdded);
      e.efa = u.name;
      e.port_state = watch_.ReadPortState(u.name).value_or("");
      known_.efas[u.name] = e.port_state;
      out->push_back(std::move(e));
    }
  }
}

void Events::Impl::OpenKmsg(KmsgReader::StartAt start) {
  absl::StatusOr<std::unique_ptr<KmsgReader>> r = KmsgReader::Open(options_.kmsg_path, start);
  if (!r.ok()) {
    // Logged once at start; later attempts stay quiet until the log appears.
    if (start == KmsgReader::StartAt::kEnd) {
      EventsLog().warn("kernel log not watched yet: {}", std::string{r.status().message()});
    }
    return;
  }
  kmsg_ = *std::move(r);
  kmsg_seen_ = true;
  if (kmsg_->is_regular_file()) watch_.WatchKmsgFile(options_.kmsg_path);
}

void Events::Impl::ReadKmsg(std::vector<Event>* out) {
  if (!kmsg_) return;
  const absl::Status s = kmsg_->ReadAvailable(
      [&](const KmsgRecord& rec) {
        if (std::optional<ResetRecord> reset = ParseResetRecord(rec.text)) {
          Event e = Make(EventKind::kDeviceReset);
          e.device = reset->device;
          e.reset = reset->step;
          out->push_back(std::move(e));
          return;
        }
        std::optional<HwErrorRecord> hw = ParseHwError(rec.text);
        if (!hw) return;
        Event e = Make(EventKind::kHardwareError);
        e.device = hw->nd_id.value_or(-1);
        e.hw_error = *std::move(hw);
        out->push_back(std::move(e));
      },
      [&](std::string_view raw, const absl::Status& why) {
        EventsLog().warn("{}: skipping malformed record: {}", kmsg_->display(),
                         std::string{why.message()});
        (void)raw;
      });
  if (!s.ok()) {
    EventsLog().error("{}; reopening the kernel log", std::string{s.message()});
    kmsg_.reset();
  }
}

Events::Events(const RootPaths& root, EventsOptions options)
    : impl_(std::make_unique<Impl>(root, std::move(options))) {}
Events::~Events() = default;
Events::SubscriptionId Events::Subscribe(Callback callback) {
  return impl_->Subscribe(std::move(callback));
}
void Events::Unsubscribe(SubscriptionId id) { impl_->Unsubscribe(id); }
absl::Status Events::Start() { return impl_->Start(); }
void Events::Stop() { impl_->Stop(); }

}  // namespace neuron
