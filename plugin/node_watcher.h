#pragma once
// Hardware health per device and EFA interface (docs/architecture.md#health), fed to NodeState.
//
// Evidence, each counted only when the HealthPolicy says so:
//   - absence: core Events device/EFA removed (and added back);
//   - state: the device's `reset` state is not READY;
//   - ECC: stats/hardware/*_uncorrected, or where the driver has them the uncorrected counts of
//     stats/hardware/health_status/, rose above the baseline (the list is spelled out in
//     node_watcher.cc; polled every poll_period on this thread, never on an RPC's path);
//   - NEURON_HW_ERR= kernel records naming the device (nd-id);
//   - EFA: port state not ACTIVE.
// A device's baseline is set when it appears (start-up, replug) and when its state returns to
// READY (a reset): the ECC baseline becomes the current counters and old HW_ERR records are
// forgotten, so health recovers once the evidence is gone.
//
// The set of known devices only grows (an unplugged device stays listed, Unhealthy), and starts
// from the instance catalog when the instance type is known, so capacity reflects the node.
//
// Thread-safety: one owner calls Start/Stop; the work runs on one thread of its own, which is
// the only owner of the evidence (docs/style.md#one-owner).

#include <chrono>
#include <memory>

#include "absl/status/status.h"
#include "plugin/config.h"
#include "plugin/node_state.h"

namespace neuron::plugin {

class NodeWatcher {
 public:
  struct Options {
    std::string root = "/";
    int lnc = 0;
    DiscoveryMode discovery = DiscoveryMode::kAuto;
    HealthPolicy health;
  };

  NodeWatcher(Options options, NodeState* state);
  ~NodeWatcher();  // Stop()s
  NodeWatcher(const NodeWatcher&) = delete;
  NodeWatcher& operator=(const NodeWatcher&) = delete;

  // Scans the node, publishes the first hardware picture and starts watching. Fails when
  // inotify or udev cannot be set up; a node without devices is fine.
  absl::Status Start();
  void Stop();

  // The instance id from DMI (socket names), known after Start(); "" when absent.
  std::string instance_id() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace neuron::plugin
