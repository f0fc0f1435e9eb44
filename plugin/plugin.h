#pragma once
// The device plugin: hardware health (NodeWatcher), the double-booking mask fed from PodResources,
// one ResourceServer per enabled resource that has devices, and the registration lifecycle
// (docs/kubelet-api.md#registration, #kubelet-restart):
//   - serve first, then Register on KUBELET_DIR/device-plugins/kubelet.sock; retry with backoff;
//   - kubelet restarts are seen by inotify on device-plugins/ (kubelet.sock created or moved in,
//     our socket deleted), with a periodic check (our socket still there, kubelet.sock still the
//     one we registered with) and the end of a ListAndWatch stream as safety nets; then the
//     socket is re-created if it is gone and Register is called again.
// A resource without devices is not served (the node idles cleanly) until devices appear.
// With --api dra (Config::api) none of that runs: the plugin serves the DRA kubelet plugin API
// instead (plugin/dra/server.h) and the ResourceSlice document (plugin/dra/slice.h).
//
// Thread-safety: Start/Stop belong to one owner; Ready, ReadyDetail, metrics and state may be
// called from any thread (the HTTP handlers do).

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "plugin/config.h"
#include "plugin/dra/slice.h"
#include "plugin/metrics.h"
#include "plugin/node_state.h"

namespace neuron::plugin {

class Plugin {
 public:
  explicit Plugin(Config config);
  ~Plugin();  // Stop()s
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  // Scans the node and starts watching, serving and registering. Fails on what retrying cannot
  // fix (inotify unavailable, a socket path too long).
  absl::Status Start();
  // Stops serving, removes our sockets, stops watching. Idempotent.
  void Stop();

  // Every enabled resource that has devices is registered with the kubelet.
  bool Ready() const;
  // One line per enabled resource: "aws.amazon.com/neuron registered neuron-i-0abc.sock".
  std::string ReadyDetail() const;

  Metrics& metrics();
  NodeState& state();

  // GET /dra/resourceslice (docs/kubelet-api.md#dra-slice): 503 before the first scan, 404
  // outside DRA mode.
  dra::SliceState::Document DraSlice() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// "<short>-<suffix>.sock", e.g. "neuron-i-0abc.sock".
std::string SocketName(Resource r, const std::string& suffix);

}  // namespace neuron::plugin
