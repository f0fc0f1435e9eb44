#pragma once
// Hardware health per device and EFA interface (docs/architecture.md#health), fed to NodeState.
//
// The node is read through core's NodeSource (discovery by --discovery, events in the matching
// mode, rescans when an event asks for one) and its evidence kept by core's HealthEvidence
// (absence, state, ECC above the baseline, NEURON_HW_ERR records, EFA port state: the list and
// the baseline rules are in core/node/health_evidence.h), polled every poll_period on this
// thread, never on an RPC's path. What is the plugin's own: which evidence counts under the
// HealthPolicy, and the reason each unhealthy device and interface gives (JudgeHealth).
//
// Thread-safety: one owner calls Start/Stop; the work runs on one thread of its own, which is
// the only owner of the evidence (docs/style.md#one-owner).

#include <chrono>
#include <memory>

#include "absl/status/status.h"
#include "core/node/health_evidence.h"
#include "core/node/node_source.h"
#include "plugin/config.h"
#include "plugin/node_state.h"

namespace neuron::plugin {

// The hardware picture under `policy`: every known device and interface with its verdict
// (core/node/device_health.h: healthy, unhealthy with its components, or unknown; the reasons,
// the deciding one first: "absent", "state RESET", "uncorrected ECC (hbm)", "NEURON_HW_ERR
// SRAM_UNCORRECTABLE_ERROR", "port DOWN"), counting the classes the policy counts. Pure: no I/O.
Hardware JudgeHealth(const HealthEvidence& evidence, const HealthPolicy& policy);
// The policy's strongest action over the classes behind `h`'s verdict (degraded evidence counts
// when its class is not ignored).
Action StrongestAction(const DeviceHealth& h, const HealthPolicy& policy);
// Marks the devices whose withhold lock another holder has (core/node/withhold.h) not healthy; a
// lock that cannot be asked about withholds too (said in the reason): a device is not handed out
// on a guess.
void MarkWithheld(std::string_view root, Hardware* hw);

class NodeWatcher {
 public:
  struct Options {
    // Root, LNC and discovery (libudev where it can run, else the directory scan); the catalog
    // does not stand in: the plugin runs as root and reads what it advertises.
    NodeSourceOptions node{.discovery = DiscoveryMode::kAuto};
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
