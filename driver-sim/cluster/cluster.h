#pragma once
// The simulated cluster: N simulated nodes on one machine, each its own ROOT, driver daemon and
// kubelet emulator, with a distinct loopback address (driver-sim/README.md#cluster).
//
// `neuron-sim cluster up` (RunClusterSupervisor) writes DIR/cluster.json, then DIR/cluster.pid and
// DIR/cluster.ready last; other code (`neuron-sim job`, tests) reads the nodes with
// ReadClusterSpec. Nothing here keeps state between calls; every function is thread-safe.

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace neuron::sim {

namespace fs = std::filesystem;

// One node of the cluster as cluster.json describes it. Paths are absolute.
struct ClusterNode {
  std::string name;         // Kubernetes node name, e.g. "node-1"
  fs::path root;            // the node's ROOT (`neuron-sim up --root`)
  fs::path kubelet_dir;     // the node's kubelet directory (`neuron-sim kubelet --kubelet-dir`)
  std::string address;      // loopback IPv4 address its pods' ranks use, e.g. "127.0.1.1"
  std::string instance_id;  // EC2 instance id the node reports, distinct per node
  std::string instance;     // instance type, e.g. "trn1.32xlarge"
};

struct ClusterSpec {
  std::vector<ClusterNode> nodes;
};

// The files of a cluster directory.
struct ClusterFiles {
  explicit ClusterFiles(fs::path d) : dir(std::move(d)) {}
  fs::path dir;
  fs::path Json() const { return dir / "cluster.json"; }
  fs::path Pid() const { return dir / "cluster.pid"; }
  fs::path Ready() const { return dir / "cluster.ready"; }
  // Held with flock(LOCK_EX) by the live supervisor, and holding its pid.
  fs::path Lock() const { return dir / "cluster.lock"; }
  // The supervisor's children, "PID NODE ROLE" per line (ReadClusterChildren, supervisor.h).
  fs::path Pids() const { return dir / "cluster.pids"; }
  fs::path Logs(const std::string& name) const { return NodeDir(name) / "logs"; }
  fs::path NodeDir(const std::string& name) const { return dir / "nodes" / name; }
};

// Reads DIR/cluster.json. NotFound when there is none; InvalidArgument naming the file and the
// field when it is malformed.
absl::StatusOr<ClusterSpec> ReadClusterSpec(const fs::path& dir);

// Writes DIR/cluster.json atomically (a temporary file renamed over it).
absl::Status WriteClusterSpec(const fs::path& dir, const ClusterSpec& spec);

// The nodes `cluster up` creates: node i (1-based) is PREFIX-i at DIR/nodes/PREFIX-i/{root,
// kubelet}, address 127.0.1.i and an instance id derived from its name. DIR must be absolute.
// InvalidArgument when count is not in 1..254, the prefix is not a DNS label, or a node's
// deepest Unix socket path would not fit in sockaddr_un (the message names that path).
absl::StatusOr<ClusterSpec> PlanCluster(const fs::path& dir, int count, const std::string& instance,
                                        const std::string& name_prefix);

// The instance id `cluster up` gives the node called `name`: "i-0" and 16 hex digits of a hash
// of the name, so distinct per name and the same from run to run.
std::string ClusterInstanceId(const std::string& name);

// The deepest Unix socket path a node of this cluster uses (driver, ctl and kubelet sockets).
fs::path LongestSocketPath(const ClusterNode& node);

// Removes the node's Unix socket files (driver, ctl, kubelet and device plugin sockets) that a
// process killed with SIGKILL leaves behind. Only for when no process of the node runs.
void RemoveNodeSockets(const ClusterNode& node);

// The largest socket path length sockaddr_un takes (without the terminating NUL).
inline constexpr size_t kMaxSocketPathLength = 107;

}  // namespace neuron::sim
