#include "driver-sim/driver/daemon.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <span>

#include "core/base/file_io.h"
#include "driver-sim/driver/daemon_impl.h"
#include "driver-sim/driver/sim_paths.h"

namespace neuron::sim {

namespace daemon_internal {

std::shared_ptr<spdlog::logger> Logger() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    if (auto existing = spdlog::get("sim-daemon")) return existing;
    return spdlog::stderr_color_mt("sim-daemon");
  }();
  return logger;
}

int64_t EpochMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace daemon_internal

namespace {

using daemon_internal::Clock;
using daemon_internal::EpochMs;
using std::chrono::milliseconds;

constexpr size_t kMaxClients = 32;
constexpr auto kClientTimeout = std::chrono::seconds(10);

std::string ErrnoText() { return std::strerror(errno); }

absl::Status Errno(std::string_view what, const std::filesystem::path& path) {
  return absl::InternalError(fmt::format("{} {}: {}", what, path.string(), ErrnoText()));
}

}  // namespace

NodeDaemon::Impl::Impl(DaemonOptions options)
    : opts_(std::move(options)),
      paths_(opts_.root),
      faults_(paths_),
      log_(daemon_internal::Logger()) {}

// ---------------------------------------------------------------------------------------------
// Lifecycle

absl::Status NodeDaemon::Impl::MakeDir(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> missing;
  for (std::filesystem::path p = dir; !p.empty() && !std::filesystem::exists(p);
       p = p.parent_path()) {
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (mkdir(it->c_str(), 0755) != 0 && errno != EEXIST) return Errno("mkdir", *it);
    created_dirs_.push_back(*it);
  }
  return absl::OkStatus();
}

absl::Status NodeDaemon::Impl::TakeLock() {
  const std::filesystem::path path = sim::SimRunDir(paths_) / "daemon.lock";
  // A lock taken on a file that a stopping daemon has just unlinked protects nothing, so the
  // locked inode must still be the one at the path.
  for (int attempt = 0; attempt < 5; ++attempt) {
    UniqueFd fd(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (!fd) return Errno("open", path);
    if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      std::array<char, 32> buf{};
      const ssize_t n = pread(fd.get(), buf.data(), buf.size() - 1, 0);
      fd.Reset();
      if (err != EWOULDBLOCK) return Errno("flock", path);
      std::string holder = n > 0 ? std::string(StripNewline(std::string_view(buf.data()))) : "";
      return absl::FailedPreconditionError(fmt::format(
          "another neuron-sim daemon{} is running on {} (it holds {}); stop it first or use "
          "another --root",
          holder.empty() ? "" : " (pid " + holder + ")", paths_.root().string(), path.string()));
    }
    struct stat by_fd = {};
    struct stat by_path = {};
    if (fstat(fd.get(), &by_fd) == 0 && stat(path.c_str(), &by_path) == 0 &&
        by_fd.st_ino == by_path.st_ino && by_fd.st_dev == by_path.st_dev) {
      const std::string pid = fmt::format("{}\n", getpid());
      if (ftruncate(fd.get(), 0) != 0 || pwrite(fd.get(), pid.data(), pid.size(), 0) < 0) {
        log_->warn("cannot record the pid in {}: {}", path.string(), ErrnoText());
      }
      lock_fd_ = std::move(fd);
      return absl::OkStatus();
    }
  }
  return absl::UnavailableError(
      fmt::format("{} keeps changing; is a daemon starting or stopping on {}?", path.string(),
                  paths_.root().string()));
}

// The simulated node's host is this machine, so its /proc is the node's: linked at ROOT/proc,
// where the DaemonSet mounts the host's, the agent's process scan sees the node's processes as
// on hardware (docs/architecture.md#noticing-runtimes). A ROOT/proc of someone else's (a real
// directory, another link) is left alone; a dead daemon's link is taken over.
absl::Status NodeDaemon::Impl::LinkProc() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path link = paths_.Proc();
  if (fs::is_symlink(link, ec)) {
    proc_link_ = fs::read_symlink(link, ec) == "/proc";
    return absl::OkStatus();
  }
  if (fs::exists(fs::symlink_status(link, ec))) return absl::OkStatus();
  fs::create_directory_symlink("/proc", link, ec);
  if (ec) return absl::InternalError(fmt::format("link {}: {}", link.string(), ec.message()));
  proc_link_ = true;
  return absl::OkStatus();
}

absl::Status NodeDaemon::Impl::ClearStale() {
  namespace fs = std::filesystem;
  std::error_code ec;
  // Holding the lock, anything of a node here is a dead daemon's, even a half-built tree.
  const bool stale =
      fs::exists(sim::SimReadyPath(paths_), ec) || fs::exists(sim::CtlSocketPath(paths_), ec) ||
      fs::exists(sim::NodeJsonPath(paths_), ec) || fs::exists(FaultsPath(paths_), ec) ||
      fs::exists(paths_.NeuronClassDir(), ec) || fs::exists(paths_.NeuronDevicesDir(), ec);
  if (!stale) return absl::OkStatus();
  log_->warn("{} holds a simulated node whose daemon is gone; clearing it", paths_.root().string());
  for (const fs::path& p :
       {sim::SimReadyPath(paths_), sim::CtlSocketPath(paths_), FaultsPath(paths_)}) {
    fs::remove(p, ec);
    if (ec) return absl::InternalError(fmt::format("remove {}: {}", p.string(), ec.message()));
  }
  // The old tree is removed with the old daemon's shape (it may have simulated another type).
  NodeConfig old{opts_.spec, opts_.lnc, opts_.instance_id, opts_.node_name};
  if (absl::StatusOr<NodeInfo> info = ReadNodeInfo(paths_); info.ok()) {
    if (absl::StatusOr<const InstanceSpec*> spec = FindInstance(info->instance_type); spec.ok()) {
      old = NodeConfig{*spec, info->lnc, info->instance_id, info->node_name};
    }
  }
  SimTree stale_tree(paths_, old);
  if (absl::Status s = stale_tree.Destroy(); !s.ok()) {
    return absl::InternalError(fmt::format("clearing the stale node at {}: {}",
                                           paths_.root().string(), std::string{s.message()}));
  }
  return absl::OkStatus();
}

absl::Status NodeDaemon::Impl::OpenEventFds() {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  if (sigprocmask(SIG_BLOCK, &mask, &old_mask_) != 0) {
    return absl::InternalError(fmt::format("sigprocmask: {}", ErrnoText()));
  }
  mask_changed_ = true;
  signal_fd_.Reset(signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC));
  timer_fd_.Reset(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
  inotify_fd_.Reset(inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!signal_fd_ || !timer_fd_ || !inotify_fd_) {
    return absl::InternalError(fmt::format("signalfd/timerfd/inotify: {}", ErrnoText()));
  }
  return absl::OkStatus();
}

absl::Status NodeDaemon::Impl::Start() {
  if (opts_.spec == nullptr) return absl::InvalidArgumentError("no instance type given");
  if (absl::Status s = CheckCtlSocketPath(paths_); !s.ok()) return s;
  started_ = true;  // from here on, Shutdown() undoes whatever was done
  auto fail = [this](absl::Status s) {
    if (absl::Status u = Shutdown(); !u.ok()) {
      log_->warn("cleanup after failure: {}", std::string{u.message()});
    }
    started_ = false;
    return s;
  };
  // Signals are blocked first, so a SIGTERM during start-up is served by Run() and cleans up.
  if (absl::Status s = OpenEventFds(); !s.ok()) return fail(s);
  if (absl::Status s = MakeDir(sim::SimRunDir(paths_)); !s.ok()) return fail(s);
  if (absl::Status s = TakeLock(); !s.ok()) return fail(s);
  if (absl::Status s = ClearStale(); !s.ok()) return fail(s);
  if (absl::Status s = LinkProc(); !s.ok()) return fail(s);

  absl::StatusOr<NeuronMajorLease> major = NeuronMajorLease::Take(paths_.root());
  if (!major.ok()) return fail(major.status());
  major_.emplace(*std::move(major));
  tree_ = std::make_unique<SimTree>(
      paths_, NodeConfig{opts_.spec, opts_.lnc, opts_.instance_id, opts_.node_name,
                         opts_.ultraserver, opts_.driver, major_->major()});
  if (absl::Status s = tree_->Create(); !s.ok()) return fail(s);
  absl::StatusOr<NodeInfo> info = ReadNodeInfo(paths_);
  if (!info.ok()) return fail(info.status());
  node_ = *info;
  devices_.assign(static_cast<size_t>(opts_.spec->devices), Device{});
  const Clock::time_point now = Clock::now();
  for (int d = 0; d < opts_.spec->devices; ++d) {
    devices_[static_cast<size_t>(d)].power.SetReady(true, now);
    WatchDevice(d);
    LogProbeReset(d);
  }
  if (absl::Status s = faults_.Write(); !s.ok()) return fail(s);
  if (absl::Status s = MakeDir(sim::CoreLockDir(paths_)); !s.ok()) return fail(s);
  mirror_ = std::make_unique<DatastoreMirror>(tree_.get(), *opts_.spec, opts_.lnc, log_);
  next_mirror_ = now + daemon_internal::kMirrorPeriod;
  // A new daemon is a freshly loaded driver: runtimes of an earlier one are not its processes.
  absl::StatusOr<std::unique_ptr<DriverServer>> driver =
      DriverServer::Start(paths_, *opts_.spec, opts_.lnc, this, mirror_.get(), log_);
  if (!driver.ok()) return fail(driver.status());
  driver_ = *std::move(driver);

  power_period_ = opts_.power_period.count() > 0 ? opts_.power_period : milliseconds(60000);
  last_minute_ = EpochMs() / 60000;
  if (opts_.power_period.count() > 0) {
    next_power_ = now + power_period_;
  } else {
    next_power_ = now + milliseconds(60000 - EpochMs() % 60000 + 5);
  }

  if (tree_->HasHealthComponents()) next_heartbeat_ = now + opts_.heartbeat_period;

  absl::StatusOr<UniqueFd> listen_fd = ListenCtlSocket(sim::CtlSocketPath(paths_));
  if (!listen_fd.ok()) return fail(listen_fd.status());
  listen_fd_ = *std::move(listen_fd);
  if (absl::Status s = WriteFileAtomic(sim::SimReadyPath(paths_), "", 0644); !s.ok()) {
    return fail(s);
  }
  log_->info(
      "simulated {} ready at {} ({} devices, {} EFA, LNC {}); try: neuron-sim ctl --root "
      "{} status",
      opts_.spec->name, paths_.root().string(), opts_.spec->devices, opts_.spec->efa_count,
      opts_.lnc, paths_.root().string());
  return absl::OkStatus();
}

absl::Status NodeDaemon::Impl::Shutdown() {
  if (!started_) return absl::OkStatus();
  started_ = false;
  namespace fs = std::filesystem;
  absl::Status result;
  auto note = [&result](const absl::Status& s) {
    if (!s.ok() && result.ok()) result = s;
  };
  std::error_code ec;
  if (lock_fd_) {  // without the lock, the files belong to someone else
    fs::remove(sim::SimReadyPath(paths_), ec);
    clients_.clear();
    if (listen_fd_) {
      listen_fd_.Reset();
      fs::remove(sim::CtlSocketPath(paths_), ec);
    }
    note(faults_.RemoveFile());
    driver_.reset();  // before the mirror it reports to
    mirror_.reset();
    if (tree_) note(tree_->Destroy());
    tree_.reset();
    if (proc_link_) fs::remove(paths_.Proc(), ec);
    proc_link_ = false;
  }
  for (UniqueFd* fd : {&signal_fd_, &timer_fd_, &inotify_fd_}) fd->Reset();
  watches_.clear();
  device_wds_.clear();
  if (lock_fd_) {
    fs::remove(sim::SimRunDir(paths_) / "daemon.lock", ec);
    // The simulator's own directories go whenever they are empty (a stale root's included);
    // rmdir leaves a live runtime's files alone.
    for (const fs::path& dir : {sim::CoreLockDir(paths_), sim::SimRunDir(paths_)}) {
      rmdir(dir.c_str());
    }
  }
  for (auto it = created_dirs_.rbegin(); it != created_dirs_.rend(); ++it) {
    rmdir(it->c_str());  // only if empty: the user's own files stay
  }
  created_dirs_.clear();
  lock_fd_.Reset();  // last: the lock guards the removals above
  if (mask_changed_) sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
  mask_changed_ = false;
  return result;
}

// ---------------------------------------------------------------------------------------------
// The loop

absl::Status NodeDaemon::Impl::Run() {
  if (!started_) return absl::FailedPreconditionError("the daemon is not started");
  std::vector<pollfd> fds;
  while (!stop_) {
    ArmTimer();
    fds.clear();
    fds.push_back({signal_fd_.get(), POLLIN, 0});
    fds.push_back({timer_fd_.get(), POLLIN, 0});
    fds.push_back({inotify_fd_.get(), POLLIN, 0});
    fds.push_back({listen_fd_.get(), POLLIN, 0});
    for (const auto& c : clients_) {
      fds.push_back({c->fd(), static_cast<int16_t>(c->replying() ? POLLOUT : POLLIN), 0});
    }
    const size_t driver_at = fds.size();
    driver_->AppendPollFds(&fds);
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(fmt::format("poll: {}", ErrnoText()));
    }
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo info{};
      while (read(signal_fd_.get(), &info, sizeof(info)) == sizeof(info)) {
        log_->info("signal {} received; stopping", info.ssi_signo);
        stop_ = true;
      }
    }
    if (fds[1].revents & POLLIN) {
      uint64_t expirations = 0;
      if (read(timer_fd_.get(), &expirations, sizeof(expirations)) < 0 && errno != EAGAIN) {
        log_->warn("timerfd read: {}", ErrnoText());
      }
    }
    if (fds[2].revents & POLLIN) HandleInotify();
    // Clients first (their indices match fds), then new ones.
    const size_t ctl_clients = driver_at - 4;
    for (size_t i = ctl_clients; i-- > 0;) {
      if (fds[4 + i].revents != 0) ServeClient(i, fds[4 + i].revents);
    }
    if (fds[3].revents & POLLIN) AcceptClients();
    driver_->Serve(std::span<const pollfd>(fds).subspan(driver_at));
    ProcessDue(Clock::now());
  }
  return absl::OkStatus();
}

void NodeDaemon::Impl::ArmTimer() {
  Clock::time_point next = std::min({next_power_, next_mirror_, next_heartbeat_});
  for (const Device& dev : devices_) {
    if (dev.reset_pending) next = std::min(next, dev.reset_done_at);
  }
  for (const auto& c : clients_) next = std::min(next, c->accepted_at() + kClientTimeout);
  const auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(next.time_since_epoch()).count();
  itimerspec spec{};
  // An absolute deadline already passed fires at once; 0 would disarm the timer instead.
  spec.it_value.tv_sec = std::max<int64_t>(ns, 1) / 1000000000;
  spec.it_value.tv_nsec = std::max<int64_t>(ns, 1) % 1000000000;
  if (timerfd_settime(timer_fd_.get(), TFD_TIMER_ABSTIME, &spec, nullptr) != 0) {
    log_->error("timerfd_settime: {}", ErrnoText());
  }
}

void NodeDaemon::Impl::ProcessDue(Clock::time_point now) {
  // Datastores first, so a power rollup in this pass sees the latest busy time.
  if (now >= next_mirror_ && mirror_) {
    mirror_->Poll(now);
    next_mirror_ = now + daemon_internal::kMirrorPeriod;
  }
  for (size_t d = 0; d < devices_.size(); ++d) {
    if (devices_[d].reset_pending && devices_[d].reset_done_at <= now) {
      CompleteReset(static_cast<int>(d));
    }
  }
  if (now >= next_power_) {
    if (opts_.power_period.count() > 0) {
      RollUpPower(now);
      next_power_ = now + power_period_;
    } else {
      // Only a changed wall-clock minute counts, so an early wake-up or a clock step does not
      // produce an extra rollup.
      const int64_t epoch_ms = EpochMs();
      if (epoch_ms / 60000 != last_minute_) {
        last_minute_ = epoch_ms / 60000;
        RollUpPower(now);
      }
      next_power_ = now + milliseconds(60000 - epoch_ms % 60000 + 5);
    }
  }
  if (now >= next_heartbeat_) {
    BeatHeartbeats();
    // A late loop (a slow tree write, a stopped process) skips the beats it missed rather than
    // writing them in a burst, as a periodic kernel thread would.
    next_heartbeat_ += opts_.heartbeat_period;
    if (next_heartbeat_ <= now) next_heartbeat_ = now + opts_.heartbeat_period;
  }
  std::erase_if(clients_, [now](const std::unique_ptr<CtlConnection>& c) {
    return now - c->accepted_at() > kClientTimeout;
  });
}

void NodeDaemon::Impl::AcceptClients() {
  for (;;) {
    UniqueFd fd(accept4(listen_fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        log_->warn("accept on {}: {}", sim::CtlSocketPath(paths_).string(), ErrnoText());
      }
      return;
    }
    if (clients_.size() >= kMaxClients) {
      log_->warn("too many ctl clients; dropping a connection");
      continue;  // fd closes here
    }
    clients_.push_back(std::make_unique<CtlConnection>(std::move(fd)));
  }
}

void NodeDaemon::Impl::ServeClient(size_t index, int16_t revents) {
  CtlConnection& c = *clients_[index];
  bool done = false;
  if (c.replying()) {
    done = (revents & (POLLERR | POLLHUP)) != 0 || c.Flush();
  } else {
    std::string line;
    switch (c.Read(&line)) {
      case CtlConnection::ReadResult::kNeedMore:
        break;
      case CtlConnection::ReadResult::kClosed:
        done = true;
        break;
      case CtlConnection::ReadResult::kTooLong:
        c.QueueReply(FormatCtlReply({CtlOutcome::kUsage, "request line too long", ""}));
        c.set_replying();
        done = c.Flush();
        break;
      case CtlConnection::ReadResult::kLine: {
        absl::StatusOr<CtlRequest> req = ParseCtlLine(line);
        CtlReply reply;
        if (!req.ok()) {
          reply = {CtlOutcome::kUsage, std::string{req.status().message()},
                   std::string(CtlUsage())};
        } else {
          // status is polled by demos and scripts; it changes nothing, so it stays out of the log.
          if (FindCtlVerb(req->command)->logged) log_->info("ctl: {}", FormatCtlRequest(*req));
          reply = Handle(*req);
          if (reply.outcome != CtlOutcome::kOk) log_->info("ctl: error: {}", reply.message);
        }
        c.QueueReply(FormatCtlReply(reply));
        c.set_replying();
        done = c.Flush();
        break;
      }
    }
  }
  if (done) clients_.erase(clients_.begin() + static_cast<std::ptrdiff_t>(index));
}

// ---------------------------------------------------------------------------------------------
// The public wrapper

NodeDaemon::NodeDaemon(DaemonOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

NodeDaemon::~NodeDaemon() {
  if (impl_->started()) {
    if (absl::Status s = impl_->Shutdown(); !s.ok()) {
      daemon_internal::Logger()->warn("shutdown: {}", std::string{s.message()});
    }
  }
}

absl::Status NodeDaemon::Start() { return impl_->Start(); }
absl::Status NodeDaemon::Run() { return impl_->Run(); }
absl::Status NodeDaemon::Shutdown() { return impl_->Shutdown(); }

int RunNodeDaemon(DaemonOptions options) {
  // The daemon is the driver: the interposer, if this process was started under it, must not
  // serve the daemon's own file accesses.
  setenv("NEURON_SIM_DRIVER_INERT", "1", 1);
  auto log = daemon_internal::Logger();
  NodeDaemon daemon(std::move(options));
  if (absl::Status s = daemon.Start(); !s.ok()) {
    log->error("{}", std::string{s.message()});
    return 1;
  }
  absl::Status run = daemon.Run();
  if (!run.ok()) log->error("{}", std::string{run.message()});
  absl::Status down = daemon.Shutdown();
  if (!down.ok()) log->error("shutdown: {}", std::string{down.message()});
  return run.ok() && down.ok() ? 0 : 1;
}

}  // namespace neuron::sim
