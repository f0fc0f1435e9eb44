#pragma once
// The device-plugin face (docs/kubelet-api.md): hardware health through the NodeState's views,
// the double-booking mask fed from PodResources, one ResourceServer per enabled resource that has
// devices, and the registration lifecycle (docs/kubelet-api.md#registration, #kubelet-restart):
//   - serve first, then Register on KUBELET_DIR/device-plugins/kubelet.sock; retry with backoff;
//   - kubelet restarts are seen by inotify on device-plugins/ (kubelet.sock created or moved in,
//     our socket deleted), with a periodic check (our socket still there, kubelet.sock still the
//     one we registered with) and the end of a ListAndWatch stream as safety nets; then the
//     socket is re-created if it is gone and Register is called again.
// A resource without devices is not served (the node idles cleanly) until devices appear.

#include <memory>
#include <string>

#include "plugin/config.h"
#include "plugin/face.h"
#include "plugin/metrics.h"
#include "plugin/node_state.h"
#include "plugin/node_watcher.h"

namespace neuron::plugin {

class DevicePluginFace final : public Face {
 public:
  // `state`, `watcher` and `metrics` outlive the face.
  DevicePluginFace(Config config, NodeState* state, NodeWatcher* watcher, Metrics* metrics);
  ~DevicePluginFace() override;  // Stop()s
  DevicePluginFace(const DevicePluginFace&) = delete;
  DevicePluginFace& operator=(const DevicePluginFace&) = delete;

  absl::Status Start() override;
  void Stop() override;
  bool Ready() const override;
  std::string ReadyDetail() const override;
  // The devices the kubelet holds, whole or by a core (the view's holdings: Allocate's and
  // PodResources').
  std::set<int> DevicesInUse() const override;

 private:
  NodeState* const state_;
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// "<short>-<suffix>.sock", e.g. "neuron-i-0abc.sock".
std::string SocketName(Resource r, const std::string& suffix);

}  // namespace neuron::plugin
