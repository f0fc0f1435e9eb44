#pragma once
// The simulated node daemon, `neuron-sim up`: the simulator's kernel driver
// (docs/architecture.md#daemon-is-the-driver, #readiness-and-lifecycle, #faults). It owns ROOT/sys
// and ROOT/dev through a SimTree, serves `neuron-sim ctl` on ROOT/run/neuron/ctl.sock, records
// runtime-visible faults in ROOT/run/neuron/faults.json, runs device resets (from ctl or from a
// write to a device's sysfs `reset` file), answers writes to `info/notify_delay`, rolls up
// `stats/power/utilization` once a minute, and beats driver 2.30's healthcheck_heartbeat.
//
// Lifecycle: Start() takes ROOT/run/neuron/daemon.lock (flock, non-blocking; a live holder means
// another daemon owns the root and Start fails), clears what a dead daemon left, builds the tree,
// listens, and writes ROOT/run/neuron/sim.ready last. Run() serves until SIGTERM or SIGINT.
// Shutdown() removes everything Start() created. driver-sim/README.md documents the files, the
// ctl protocol and the kernel-log lines.
//
// Not thread-safe: one thread runs everything in a poll() loop over the listening socket, the
// client connections, a timerfd, a signalfd and an inotify descriptor. Start() blocks SIGTERM and
// SIGINT for the calling thread (they arrive through the signalfd); use it from a
// single-threaded process.

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/model/catalog.h"
#include "driver-sim/driver/sim_tree_driver.h"
#include "driver-sim/driver/ultraserver.h"

namespace neuron::sim {

struct CtlVerb;  // ctl.h

struct DaemonOptions {
  std::filesystem::path root;
  const InstanceSpec* spec = nullptr;
  int lnc = 1;              // already resolved against the spec (ResolveLnc)
  std::string node_name;    // empty: "sim-<instance type>"
  std::string instance_id;  // empty: made up from the root
  // The node's place in its UltraServer, on UltraServer instance types (driver/ultraserver.h).
  UltraServerPosition ultraserver;
  // The driver generation played (`--driver-version`, driver-sim/README.md#driver-versions).
  SimDriver driver = NewestSimDriver();
  // How long a device reset takes (D11, driver-sim/README.md#deviations: accelerated; the real
  // duration is unverified).
  std::chrono::milliseconds reset_duration{300};
  // Power rollup period. 0 rolls up when the wall-clock minute changes, as the driver does; a
  // shorter period accelerates rollups for tests (D11, driver-sim/README.md#deviations). Epoch
  // stamps are wall-clock either way.
  std::chrono::milliseconds power_period{0};
  // How often the driver advances each device's health_status/healthcheck_heartbeat (driver
  // 2.30, Trn2 and Trn3). The release notes give no period: 1 s is an assumption
  // (driver-sim/README.md#driver-versions).
  std::chrono::milliseconds heartbeat_period{1000};
};

class NodeDaemon {
 public:
  explicit NodeDaemon(DaemonOptions options);
  ~NodeDaemon();  // calls Shutdown() if Start() succeeded and Shutdown() was not called
  NodeDaemon(const NodeDaemon&) = delete;
  NodeDaemon& operator=(const NodeDaemon&) = delete;

  // FailedPrecondition when another live daemon holds the root; InvalidArgument when ROOT is too
  // long for the control socket. On failure, whatever was created is removed again.
  absl::Status Start();
  // Serves until SIGTERM or SIGINT arrives.
  absl::Status Run();
  // Removes sim.ready, ctl.sock, faults.json, the tree, node.json and daemon.lock, and the
  // directories Start() created when they are empty. Idempotent.
  absl::Status Shutdown();

 private:
  class Impl;
  // ctl.h's table of verbs is the daemon's, each row beside its handler (daemon_commands.cc).
  friend const std::vector<CtlVerb>& CtlVerbs();
  std::unique_ptr<Impl> impl_;
};

// `neuron-sim up` from Start to Shutdown; returns the process exit code (0 after a clean stop,
// 1 on failure, with the reason logged).
int RunNodeDaemon(DaemonOptions options);

}  // namespace neuron::sim
