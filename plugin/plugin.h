#pragma once
// neuron-device-plugin's node and its one kubelet face: the NodeState, the NodeWatcher that feeds
// it hardware health (docs/architecture.md#health) and the plugin's metrics, shared by whichever
// face Config::api names: the device-plugin API (plugin/device_plugin_face.h) or, with --api dra,
// the DRA kubelet plugin API and its ResourceSlice document (plugin/dra/face.h).
//
// Thread-safety: Start/Stop belong to one owner; Ready, ReadyDetail, metrics and state may be
// called from any thread (the HTTP handlers do).

#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "plugin/config.h"
#include "plugin/dra/slice.h"
#include "plugin/face.h"
#include "plugin/health_api.h"
#include "plugin/metrics.h"
#include "plugin/node_state.h"
#include "plugin/node_watcher.h"
#include "plugin/remediation.h"

namespace neuron::plugin {

namespace dra {
class DraFace;
}  // namespace dra

class Plugin {
 public:
  explicit Plugin(Config config);
  ~Plugin();  // Stop()s
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  // Scans the node and starts the face: watching, serving and registering. Fails on what
  // retrying cannot fix (inotify unavailable, a socket path too long).
  absl::Status Start();
  // Stops the face (serving, our sockets), then watching. Idempotent.
  void Stop();

  bool Ready() const { return face_->Ready(); }
  std::string ReadyDetail() const { return face_->ReadyDetail(); }
  absl::Status Live() const { return face_->Live(); }

  Metrics& metrics() { return metrics_; }
  NodeState& state() { return state_; }

  // GET /dra/resourceslice (docs/kubelet-api.md#dra-slice): 503 before the first scan, 404
  // outside DRA mode, 304 while `unless` is the current generation.
  // GET /health (plugin/health_api.h).
  HealthResponse Health(std::optional<uint64_t> unless = std::nullopt) const;
  dra::SliceState::Document DraSlice(std::optional<uint64_t> unless = std::nullopt) const;

 private:
  const Config config_;
  Metrics metrics_;
  NodeState state_;
  NodeWatcher watcher_;
  dra::DraFace* dra_ = nullptr;  // the face, when it is the DRA one
  std::unique_ptr<Face> face_;
  Remediator remediator_;  // the policy's reset (plugin/remediation.h)
};

}  // namespace neuron::plugin
