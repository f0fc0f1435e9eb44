// `cluster down` and what it and `status` need to know about a running supervisor.
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <system_error>

#include "core/proc/procinfo.h"
#include "driver-sim/cluster/cluster.h"
#include "driver-sim/cluster/supervisor.h"

namespace neuron::sim {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string ReadText(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Waits until `pid` has exited (a zombie counts: it runs nothing), at most `ceiling`. A pidfd
// turns readable when the process exits, so this waits on the event itself.
bool WaitGone(int pid, std::chrono::milliseconds ceiling) {
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;
  pollfd p{fd, POLLIN, 0};
  int rc = 0;
  do {
    rc = poll(&p, 1, static_cast<int>(ceiling.count()));
  } while (rc < 0 && errno == EINTR);
  close(fd);
  return rc > 0;
}

// The children left of a supervisor that is gone: they had SIGTERM when it died
// (PR_SET_PDEATHSIG); SIGKILL to those that do not exit within `ceiling`.
bool StopLeftovers(const fs::path& dir, const std::vector<ClusterChild>& children,
                   std::chrono::milliseconds ceiling, std::ostream& err) {
  const auto deadline = Clock::now() + ceiling;
  bool all_gone = true;
  for (const ClusterChild& c : children) {
    if (!IsClusterProcess(c.pid, dir)) continue;
    const auto left = std::max(
        0ms, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
    kill(c.pid, SIGTERM);
    if (WaitGone(c.pid, left)) continue;
    err << fmt::format("neuron-sim cluster down: {}: {} (pid {}) still runs: SIGKILL\n", c.node,
                       c.role, c.pid);
    kill(c.pid, SIGKILL);
    if (!WaitGone(c.pid, 10s)) {
      err << fmt::format("neuron-sim cluster down: {}: {} (pid {}) survived SIGKILL\n", c.node,
                         c.role, c.pid);
      all_gone = false;
    }
  }
  return all_gone;
}

}  // namespace

bool IsClusterProcess(int pid, const fs::path& dir) {
  if (pid <= 0) return false;
  static const ProcReader proc = ProcReader::AtDirectory("/proc");
  const absl::StatusOr<std::string> cmdline = proc.CommandLine(pid);
  return cmdline.ok() && cmdline->find(dir.string()) != std::string::npos;
}

std::vector<ClusterChild> ReadClusterChildren(const fs::path& dir) {
  std::vector<ClusterChild> out;
  std::istringstream in(ReadText(ClusterFiles(dir).Pids()));
  ClusterChild c;
  while (in >> c.pid >> c.node >> c.role) out.push_back(c);
  return out;
}

std::optional<int> LiveSupervisor(const fs::path& dir) {
  // The holder of the lock, from /proc/locks: taking the lock ourselves to test it would make a
  // concurrent `up` refuse the directory.
  struct stat st {};
  if (stat(ClusterFiles(dir).Lock().c_str(), &st) != 0) return std::nullopt;
  const std::string want =
      fmt::format("{:02x}:{:02x}:{}", ::major(st.st_dev), ::minor(st.st_dev), st.st_ino);
  std::istringstream locks(ReadText("/proc/locks"));
  for (std::string line; std::getline(locks, line);) {
    if (line.find("->") != std::string::npos) continue;  // a waiter, not a holder
    std::istringstream words(line);
    std::string id;
    std::string type;
    std::string advisory;
    std::string mode;
    int pid = 0;
    std::string dev_inode;
    if (!(words >> id >> type >> advisory >> mode >> pid >> dev_inode) || type != "FLOCK") continue;
    // The kernel prints the file as "%02x:%02x:%lu": device major, minor, inode.
    if (dev_inode == want) return pid;
  }
  return std::nullopt;
}

int StopCluster(const fs::path& dir, std::chrono::milliseconds ceiling, std::ostream& out,
                std::ostream& err) {
  const ClusterFiles files(dir);
  // Read before the supervisor removes it: what to look for if it has to be killed.
  const std::vector<ClusterChild> children = ReadClusterChildren(dir);
  const std::optional<int> pid = LiveSupervisor(dir);
  if (!pid) {
    out << fmt::format("no cluster running in {}\n", dir.string());
  } else {
    kill(*pid, SIGTERM);
    if (!WaitGone(*pid, ceiling)) {
      err << fmt::format(
          "neuron-sim cluster down: the supervisor (pid {}) did not stop within {} s: SIGKILL\n",
          *pid, std::chrono::duration_cast<std::chrono::seconds>(ceiling).count());
      kill(*pid, SIGKILL);
      WaitGone(*pid, 10s);
    }
  }
  const bool all_gone = StopLeftovers(dir, children, ceiling, err);
  // After a SIGKILL (of the supervisor or of its children) the sockets stay behind.
  if (absl::StatusOr<ClusterSpec> spec = ReadClusterSpec(dir); spec.ok() && all_gone) {
    for (const ClusterNode& n : spec->nodes) RemoveNodeSockets(n);
  }
  std::error_code ec;
  for (const fs::path& p : {files.Ready(), files.Pid(), files.Pids()}) fs::remove(p, ec);
  if (pid && all_gone) out << fmt::format("cluster in {} stopped\n", dir.string());
  return all_gone ? 0 : 1;
}

}  // namespace neuron::sim
