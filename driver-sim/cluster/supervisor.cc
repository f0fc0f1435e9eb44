#include "driver-sim/cluster/supervisor.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <set>
#include <system_error>

#include "absl/status/status.h"
#include "driver-sim/cluster/cluster.h"
#include "driver-sim/driver/sim_paths.h"
#include "driver-sim/driver/sim_tree.h"
#include "driver-sim/kubelet/kubelet_control.h"

namespace neuron::sim {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

enum class Role { kDaemon, kKubelet, kPlugin };

const char* RoleName(Role r) {
  switch (r) {
    case Role::kDaemon:
      return "daemon";
    case Role::kKubelet:
      return "kubelet";
    case Role::kPlugin:
      return "plugin";
  }
  return "?";
}

struct Child {
  size_t node = 0;  // index into the spec
  Role role = Role::kDaemon;
  pid_t pid = -1;
  std::optional<int> exit_code;  // 128 + signal when killed
  bool stopping = false;         // we sent SIGTERM: its exit is expected
};

void Say(const std::string& line) {
  std::fprintf(stderr, "neuron-sim cluster: %s\n", line.c_str());
}

// A loopback address other than 127.0.0.1 is usable when Linux routes all of 127/8 on lo, as it
// does by default; checked so a node never starts with an address its ranks cannot use.
absl::Status CheckAddressBinds(const std::string& address) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  if (inet_pton(AF_INET, address.c_str(), &sa.sin_addr) != 1) {
    return absl::InvalidArgumentError(fmt::format("{}: not an IPv4 address", address));
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(fmt::format("socket: {}", std::strerror(errno)));
  const int rc = bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa));
  const int saved = errno;
  close(fd);
  if (rc == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(
      fmt::format("cannot bind the node address {}: {} (Linux routes 127.0.0.0/8 on lo by default)",
                  address, std::strerror(saved)));
}

// Takes DIR/cluster.lock and writes our pid into it. The fd stays open (close-on-exec, so no
// child holds it) for the supervisor's life; the kernel releases the lock however we exit.
absl::StatusOr<int> TakeLock(const ClusterFiles& files) {
  std::error_code ec;
  fs::create_directories(files.dir, ec);
  const int fd = open(files.Lock().c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        fmt::format("{}: {}", files.Lock().string(), std::strerror(errno)));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    close(fd);
    const std::optional<int> pid = LiveSupervisor(files.dir);
    return absl::FailedPreconditionError(fmt::format(
        "{} already holds a live cluster (supervisor pid {}); stop it first with `neuron-sim "
        "cluster down --dir {}`",
        files.dir.string(), pid ? std::to_string(*pid) : "unknown", files.dir.string()));
  }
  const std::string pid = fmt::format("{}\n", getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    close(fd);
    return absl::InternalError(fmt::format("{}: {}", files.Lock().string(), std::strerror(errno)));
  }
  return fd;
}

// fork + exec rather than posix_spawn: the child must ask for SIGTERM when we die
// (PR_SET_PDEATHSIG), so that a SIGKILLed supervisor leaves no node running for long, and it
// gets a process group of its own, so that a terminal's ^C reaches only us and we stop the
// nodes in order. Only async-signal-safe calls after fork (we are single-threaded anyway).
pid_t SpawnChild(const std::vector<std::string>& args, const fs::path& logs,
                 const std::string& log_name, const sigset_t& child_mask, std::string* error) {
  const std::string out = (logs / (log_name + ".out")).string();
  const std::string err = (logs / (log_name + ".err")).string();
  const int out_fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int err_fd = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  std::vector<std::string> copy = args;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  pid_t pid = -1;
  if (out_fd >= 0 && err_fd >= 0 && null_fd >= 0) pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);  // we died before prctl took effect
    dup2(null_fd, 0);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGPIPE, &dfl, nullptr);
    sigprocmask(SIG_SETMASK, &child_mask, nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  const int saved = errno;
  for (const int fd : {out_fd, err_fd, null_fd}) {
    if (fd >= 0) close(fd);
  }
  if (pid < 0) *error = fmt::format("cannot start {}: {}", args[0], std::strerror(saved));
  return pid;
}

class Supervisor {
 public:
  Supervisor(ClusterOptions options, ClusterSpec spec)
      : options_(std::move(options)), spec_(std::move(spec)), files_(options_.dir) {}

  int Run();

 private:
  absl::Status StartNodes();
  absl::Status Spawn(size_t node, Role role);
  absl::Status WaitFor(const std::function<bool()>& done, const std::string& what,
                       const std::vector<Role>& roles);
  bool HandleSignal(int sig);  // false on SIGTERM/SIGINT
  void Reap();
  absl::Status WriteFiles();
  void Serve();
  bool StopRoles(const std::vector<Role>& roles);
  void RemoveFiles();
  bool KubeletReady(const ClusterNode& n) const;
  bool PluginReady(const ClusterNode& n) const;

  const ClusterOptions options_;
  const ClusterSpec spec_;
  const ClusterFiles files_;
  sigset_t handled_{};
  sigset_t child_mask_{};
  std::vector<Child> children_;
  bool unexpected_exit_ = false;
  bool stop_requested_ = false;
};

absl::Status Supervisor::Spawn(size_t node, Role role) {
  const ClusterNode& n = spec_.nodes[node];
  std::vector<std::string> args;
  const std::string sim = options_.sim_bin.string();
  switch (role) {
    case Role::kDaemon:
      args = {sim,           "up",   "--instance",    n.instance,   "--root", n.root.string(),
              "--node-name", n.name, "--instance-id", n.instance_id};
      args.insert(args.end(), options_.up_args.begin(), options_.up_args.end());
      break;
    case Role::kKubelet:
      args = {sim, "kubelet", "--root", n.root.string(), "--kubelet-dir", n.kubelet_dir.string()};
      break;
    case Role::kPlugin:
      args = {options_.device_plugin.string(),
              "--root",
              n.root.string(),
              "--kubelet-dir",
              n.kubelet_dir.string(),
              "--listen",
              fmt::format("{}:{}", n.address, options_.plugin_port)};
      break;
  }
  std::string error;
  const pid_t pid = SpawnChild(args, files_.Logs(n.name), RoleName(role), child_mask_, &error);
  if (pid < 0) return absl::InternalError(fmt::format("{}: {}", n.name, error));
  children_.push_back(Child{node, role, pid, std::nullopt, false});
  return absl::OkStatus();
}

void Supervisor::Reap() {
  for (;;) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (Child& c : children_) {
      if (c.pid != pid) continue;
      c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      if (c.stopping) break;
      unexpected_exit_ = true;
      const std::string& name = spec_.nodes[c.node].name;
      Say(fmt::format("{}: {} (pid {}) exited unexpectedly with code {}; log: {}", name,
                      RoleName(c.role), pid, *c.exit_code,
                      (files_.Logs(name) / (std::string(RoleName(c.role)) + ".err")).string()));
    }
  }
}

bool Supervisor::HandleSignal(int sig) {
  if (sig == SIGCHLD) {
    Reap();
    return true;
  }
  if (sig == SIGTERM || sig == SIGINT) {
    stop_requested_ = true;
    return false;
  }
  return true;
}

// Waits until `done` holds, taking signals meanwhile; fails when a child of `roles` exits
// first, on SIGTERM/SIGINT, or at the ready ceiling.
absl::Status Supervisor::WaitFor(const std::function<bool()>& done, const std::string& what,
                                 const std::vector<Role>& roles) {
  const auto deadline = Clock::now() + options_.ready_ceiling;
  for (;;) {
    for (const Child& c : children_) {
      if (!c.exit_code || std::find(roles.begin(), roles.end(), c.role) == roles.end()) continue;
      const std::string& name = spec_.nodes[c.node].name;
      return absl::FailedPreconditionError(fmt::format(
          "{}: {} exited with code {} before {}; see {}", name, RoleName(c.role), *c.exit_code,
          what, (files_.Logs(name) / (std::string(RoleName(c.role)) + ".err")).string()));
    }
    if (done()) return absl::OkStatus();
    if (Clock::now() >= deadline) {
      return absl::DeadlineExceededError(fmt::format(
          "not every node reached {} within {} s; logs under {}", what,
          std::chrono::duration_cast<std::chrono::seconds>(options_.ready_ceiling).count(),
          (files_.dir / "nodes").string()));
    }
    // The files we wait for have no event of their own: poll them, but wake at once for a
    // signal (a child's exit, a stop).
    const timespec tick{0, 20'000'000};
    const int sig = sigtimedwait(&handled_, nullptr, &tick);
    if (sig > 0 && !HandleSignal(sig)) {
      return absl::CancelledError(fmt::format("stopped by a signal before {}", what));
    }
  }
}

bool Supervisor::KubeletReady(const ClusterNode& n) const {
  std::error_code ec;
  return fs::exists(n.kubelet_dir / "neuron-sim-kubelet.sock", ec) &&
         fs::exists(n.kubelet_dir / "device-plugins/kubelet.sock", ec) &&
         fs::exists(n.kubelet_dir / "pod-resources/kubelet.sock", ec);
}

// Ready as a scheduler needs it: every resource socket the plugin serves (it serves them all
// before it registers any, plugin/README.md#behaviour) is registered with the node's kubelet, its
// ListAndWatch stream is open, and every device it lists is healthy. Sockets alone are not
// enough: a job admitted between them and the first device list was refused with "no healthy
// devices present".
bool Supervisor::PluginReady(const ClusterNode& n) const {
  std::set<std::string> sockets;
  std::error_code ec;
  for (auto it = fs::directory_iterator(n.kubelet_dir / "device-plugins", ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.ends_with("-" + n.instance_id + ".sock")) sockets.insert(name);
  }
  if (sockets.empty()) return false;
  const absl::StatusOr<std::vector<ResourceState>> resources =
      KubeletResources(n.kubelet_dir.string());
  if (!resources.ok()) return false;
  for (const ResourceState& r : *resources) {
    if (r.connected && r.capacity > 0 && r.allocatable == r.capacity) sockets.erase(r.endpoint);
  }
  return sockets.empty();
}

absl::Status Supervisor::StartNodes() {
  for (size_t i = 0; i < spec_.nodes.size(); ++i) {
    const ClusterNode& n = spec_.nodes[i];
    std::error_code ec;
    for (const fs::path& d : {n.root, n.kubelet_dir, files_.Logs(n.name)}) {
      fs::create_directories(d, ec);
      if (ec) return absl::InternalError(fmt::format("{}: {}", d.string(), ec.message()));
    }
    if (absl::Status s = CheckAddressBinds(n.address); !s.ok()) return s;
  }
  // The trees are built in parallel (each daemon is its own process); each kubelet starts as
  // soon as its node is ready.
  for (size_t i = 0; i < spec_.nodes.size(); ++i) {
    if (absl::Status s = Spawn(i, Role::kDaemon); !s.ok()) return s;
  }
  std::vector<bool> kubelet_started(spec_.nodes.size(), false);
  absl::Status status = absl::OkStatus();
  const auto daemons_ready = [&] {
    bool all = true;
    for (size_t i = 0; i < spec_.nodes.size() && status.ok(); ++i) {
      if (kubelet_started[i]) continue;
      if (!fs::exists(SimReadyPath(RootPaths(spec_.nodes[i].root)))) {
        all = false;
        continue;
      }
      status = Spawn(i, Role::kKubelet);
      kubelet_started[i] = true;
    }
    return all || !status.ok();
  };
  if (absl::Status s = WaitFor(daemons_ready, "sim.ready", {Role::kDaemon}); !s.ok()) return s;
  if (!status.ok()) return status;
  const auto kubelets_ready = [&] {
    return std::all_of(spec_.nodes.begin(), spec_.nodes.end(),
                       [&](const ClusterNode& n) { return KubeletReady(n); });
  };
  const std::vector<Role> all_roles{Role::kDaemon, Role::kKubelet, Role::kPlugin};
  if (absl::Status s = WaitFor(kubelets_ready, "the kubelet's sockets", all_roles); !s.ok()) {
    return s;
  }
  if (options_.device_plugin.empty()) return absl::OkStatus();
  for (size_t i = 0; i < spec_.nodes.size(); ++i) {
    if (absl::Status s = Spawn(i, Role::kPlugin); !s.ok()) return s;
  }
  const auto plugins_ready = [&] {
    return std::all_of(spec_.nodes.begin(), spec_.nodes.end(),
                       [&](const ClusterNode& n) { return PluginReady(n); });
  };
  return WaitFor(plugins_ready, "the device plugin's resources, every device healthy", all_roles);
}

absl::Status Supervisor::WriteFiles() {
  if (absl::Status s = WriteClusterSpec(files_.dir, spec_); !s.ok()) return s;
  std::string pids;
  for (const Child& c : children_) {
    pids += fmt::format("{} {} {}\n", c.pid, spec_.nodes[c.node].name, RoleName(c.role));
  }
  if (absl::Status s = WriteFileAtomic(files_.Pids(), pids, 0644); !s.ok()) return s;
  if (absl::Status s = WriteFileAtomic(files_.Pid(), fmt::format("{}\n", getpid()), 0644);
      !s.ok()) {
    return s;
  }
  return WriteFileAtomic(files_.Ready(), "", 0644);
}

void Supervisor::Serve() {
  while (!stop_requested_) {
    const int sig = sigwaitinfo(&handled_, nullptr);
    if (sig > 0) HandleSignal(sig);
  }
}

// SIGTERM to every running child of `roles`, SIGKILL to those left after the grace. True when
// each exited by itself with code 0.
bool Supervisor::StopRoles(const std::vector<Role>& roles) {
  const auto mine = [&](const Child& c) {
    return std::find(roles.begin(), roles.end(), c.role) != roles.end();
  };
  for (Child& c : children_) {
    if (!mine(c) || c.exit_code) continue;
    c.stopping = true;
    kill(c.pid, SIGTERM);
  }
  const auto running = [&] {
    return std::any_of(children_.begin(), children_.end(),
                       [&](const Child& c) { return mine(c) && !c.exit_code; });
  };
  bool clean = true;
  for (bool killed = false; running();) {
    const auto deadline = Clock::now() + options_.grace;
    while (running() && Clock::now() < deadline) {
      const auto left =
          std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - Clock::now());
      const timespec ts{static_cast<time_t>(left.count() / 1'000'000'000),
                        static_cast<decltype(timespec::tv_nsec)>(left.count() % 1'000'000'000)};
      if (sigtimedwait(&handled_, nullptr, &ts) == SIGCHLD) Reap();
    }
    if (!running() || killed) break;
    for (const Child& c : children_) {
      if (!mine(c) || c.exit_code) continue;
      Say(fmt::format("{}: {} (pid {}) outlived the grace period: SIGKILL",
                      spec_.nodes[c.node].name, RoleName(c.role), c.pid));
      kill(c.pid, SIGKILL);
      clean = false;
    }
    killed = true;
  }
  for (const Child& c : children_) {
    if (mine(c) && c.exit_code != 0) clean = false;
  }
  return clean;
}

void Supervisor::RemoveFiles() {
  std::error_code ec;
  for (const fs::path& p : {files_.Ready(), files_.Pid(), files_.Pids()}) fs::remove(p, ec);
}

int Supervisor::Run() {
  sigemptyset(&handled_);
  for (const int sig : {SIGTERM, SIGINT, SIGCHLD}) sigaddset(&handled_, sig);
  sigprocmask(SIG_BLOCK, &handled_, &child_mask_);
  absl::StatusOr<int> lock = TakeLock(files_);
  if (!lock.ok()) {
    Say(std::string{lock.status().message()});
    return 1;
  }
  RemoveFiles();  // a previous supervisor's, if it was SIGKILLed
  // And the previous cluster's description: nothing may read this one's before it is ready.
  std::error_code ec;
  fs::remove(files_.Json(), ec);
  absl::Status s = StartNodes();
  if (s.ok()) s = WriteFiles();
  bool clean = s.ok();
  if (s.ok()) {
    std::printf("cluster ready: %zu nodes in %s\n", spec_.nodes.size(), files_.dir.c_str());
    std::fflush(stdout);
    Serve();
  } else if (!absl::IsCancelled(s)) {
    Say(std::string{s.message()});
  }
  fs::remove(files_.Ready(), ec);  // first: readers must stop relying on the cluster now
  clean = StopRoles({Role::kPlugin, Role::kKubelet}) && clean;
  clean = StopRoles({Role::kDaemon}) && clean;
  // A child that died by SIGKILL (ours or someone's) left its sockets; none runs any more.
  for (const ClusterNode& n : spec_.nodes) RemoveNodeSockets(n);
  RemoveFiles();
  close(*lock);
  return clean && !unexpected_exit_ ? 0 : 1;
}

}  // namespace

int RunClusterSupervisor(const ClusterOptions& options) {
  absl::StatusOr<ClusterSpec> spec =
      PlanCluster(options.dir, options.nodes, options.instance, options.name_prefix);
  if (!spec.ok()) {
    Say(std::string{spec.status().message()});
    return absl::IsInvalidArgument(spec.status()) ? 2 : 1;  // a usage error
  }
  Supervisor supervisor(options, *std::move(spec));
  return supervisor.Run();
}

}  // namespace neuron::sim
