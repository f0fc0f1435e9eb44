#pragma once
// A running simulated cluster for tests, the soak and benchmarks: `neuron-sim cluster up` over a
// directory (driver-sim/README.md#cluster), its nodes as cluster.json describes them, `ctl` on
// one node, and `cluster down` with a check that nothing of the cluster is left. No GoogleTest
// dependency: failures come back as values (Up() is false and Log() says why; Down() says what
// was left); a test that wants the destructor's stop checked passes on_problem. Thread-compatible:
// one owner.

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "driver-sim/cluster/cluster.h"
#include "driver-sim/cluster/supervisor.h"
#include "tests/support/sim_node.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace neuron::testing {

struct SimClusterOptions {
  std::string sim_bin;  // the neuron-sim binary
  int nodes = 2;
  std::string instance = "trn1.32xlarge";
  std::vector<std::string> extra{};  // more `cluster up` arguments, e.g. --device-plugin BIN
  // The cluster's directory; empty: a new one under TMPDIR (named short, so that the nodes'
  // socket paths stay under 107 bytes), removed with the fixture.
  std::filesystem::path dir{};
  // How long Up() waits for cluster.ready at most; it stops as soon as the supervisor exits.
  std::chrono::milliseconds ready_ceiling = kSimReadyCeiling;
  // Called from the destructor with what its Down() found wrong, if anything.
  std::function<void(const std::string& problem)> on_problem{};
};

class SimCluster {
 public:
  explicit SimCluster(SimClusterOptions options);
  ~SimCluster();
  SimCluster(const SimCluster&) = delete;
  SimCluster& operator=(const SimCluster&) = delete;

  // Starts `neuron-sim cluster up --nodes N --instance T --dir DIR <extra...>`, waits for
  // DIR/cluster.ready and reads cluster.json and cluster.pids. False when it could not start,
  // exited first, the ceiling passed or cluster.json is unreadable (Log() says which).
  bool Up();
  bool ready() const { return ready_; }
  pid_t pid() const { return pid_; }  // the supervisor; -1 before Up()
  // The supervisor's exit code once it has exited (reaped without waiting).
  std::optional<int> Poll();

  const std::filesystem::path& dir() const { return dir_; }
  const sim::ClusterSpec& spec() const { return spec_; }
  const sim::ClusterNode& node(size_t i) const { return spec_.nodes.at(i); }  // 0-based
  // The supervisor's children as it recorded them when ready.
  const std::vector<sim::ClusterChild>& children() const { return children_; }
  // Why Up() failed (if it did), then what the supervisor wrote to stderr.
  std::string Log() const;

  // `neuron-sim args...` to completion.
  RunResult Sim(const std::vector<std::string>& args,
                std::chrono::milliseconds ceiling = std::chrono::seconds(120)) const;
  // `neuron-sim ctl --root <node i's root> args...` to completion.
  RunResult Ctl(size_t i, const std::vector<std::string>& args,
                std::chrono::milliseconds ceiling = std::chrono::seconds(60)) const;

  // `neuron-sim cluster down --dir DIR`, then checks: it exited 0, the supervisor exited 0 (when
  // it still ran; a test that made it exit has seen its code), no child of it runs and no socket
  // is left under DIR. Returns what was wrong, empty when nothing
  // was. Later calls return the same.
  std::string Down();

 private:
  SimClusterOptions options_;
  std::unique_ptr<TempDir> temp_;  // when the fixture chose the directory
  std::filesystem::path dir_;
  pid_t pid_ = -1;
  bool ready_ = false;
  std::optional<std::string> down_;  // Down()'s answer once run
  std::optional<int> exit_code_;
  std::string error_;
  sim::ClusterSpec spec_;
  std::vector<sim::ClusterChild> children_;
};

// Whether `pid` runs a process whose command line names `dir` (pids are reused: a bare kill(pid,
// 0) could find another process).
bool RunsWithin(pid_t pid, const std::filesystem::path& dir);
// The Unix sockets under `dir`, for leak checks.
std::vector<std::filesystem::path> SocketsUnder(const std::filesystem::path& dir);

}  // namespace neuron::testing
