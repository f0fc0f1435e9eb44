#pragma once
// `neuron-sim cluster up` and `down` (driver-sim/README.md#cluster): the supervisor that starts
// one `neuron-sim up`, one `neuron-sim kubelet` and, when asked, one device plugin per node, and
// the command that stops it. The supervisor is single-threaded: it blocks SIGTERM, SIGINT and
// SIGCHLD and takes them with sigtimedwait, so it must be called before any thread exists.

#include <chrono>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace neuron::sim {

struct ClusterOptions {
  std::filesystem::path dir;  // absolute
  int nodes = 0;
  std::string instance;
  std::string name_prefix = "node";
  // The neuron-sim binary the children run (this one by default).
  std::filesystem::path sim_bin = "/proc/self/exe";
  // The device plugin to start per node (`BIN --root ROOT --kubelet-dir KDIR --listen
  // ADDRESS:PORT`); empty: none.
  std::filesystem::path device_plugin;
  // Its HTTP port on the node's address. 0: any free one (it prints "listening on port N" in
  // logs/plugin.out), so that clusters side by side, which share the addresses, never collide.
  int plugin_port = 0;
  std::vector<std::string> up_args;  // more arguments for every `neuron-sim up`, e.g. --lnc 2
  // How long every node may take to be ready (a ceiling: the supervisor goes on as soon as the
  // files appear, and gives up at once when a child exits first).
  std::chrono::milliseconds ready_ceiling = std::chrono::minutes(5);
  // Between SIGTERM and SIGKILL for each child when stopping.
  std::chrono::milliseconds grace = std::chrono::seconds(60);
};

// Runs the cluster until SIGTERM or SIGINT. Returns the exit code: 0 after a clean stop, 1 when
// it could not start (the message on stderr names the node and its log), when DIR holds a live
// cluster, or when a child died unexpectedly or needed SIGKILL.
int RunClusterSupervisor(const ClusterOptions& options);

// `cluster down`: SIGTERM to the supervisor of DIR, waits (at most `ceiling`) until it exited,
// then SIGKILL to it and to any child of it left. Returns 0 when nothing of the cluster runs
// any more (also when none did), 1 otherwise.
int StopCluster(const std::filesystem::path& dir, std::chrono::milliseconds ceiling,
                std::ostream& out, std::ostream& err);

// The children the supervisor of DIR started, from DIR/cluster.pids: one "PID NODE ROLE" line
// each (ROLE daemon, kubelet or plugin). Empty when there is no such file.
struct ClusterChild {
  int pid = -1;
  std::string node;
  std::string role;
};
std::vector<ClusterChild> ReadClusterChildren(const std::filesystem::path& dir);

// Whether `pid` still runs a process of the cluster in `dir`: pids are reused, so a pid from a
// file counts only while its command line names the cluster's directory.
bool IsClusterProcess(int pid, const std::filesystem::path& dir);

// The pid of DIR's live supervisor (the holder of DIR/cluster.lock), or nullopt when none runs.
std::optional<int> LiveSupervisor(const std::filesystem::path& dir);

}  // namespace neuron::sim
