#pragma once
// One kubelet API over the node: the device-plugin face (plugin/device_plugin_face.h) or the DRA
// face (plugin/dra/face.h). Plugin (plugin/plugin.h) owns the node they share (the NodeState, the
// NodeWatcher that feeds it, the metrics) and runs the one face Config::api names; neither face
// knows the other's state.
//
// Thread-safety: Start/Stop belong to one owner; Ready and ReadyDetail may be called from any
// thread (the HTTP handlers do).

#include <set>
#include <string>

#include "absl/status/status.h"

namespace neuron::plugin {

class Face {
 public:
  virtual ~Face() = default;

  // Starts the node watcher (after subscribing to its views), then serving and registering.
  // Fails on what retrying cannot fix (inotify unavailable, a socket path too long).
  virtual absl::Status Start() = 0;
  // Stops serving and removes our sockets. Idempotent; the owner stops the watcher after.
  virtual void Stop() = 0;

  // Registered with the kubelet (every enabled resource that has devices, for the device plugin).
  virtual bool Ready() const = 0;
  // One line per registration: "aws.amazon.com/neuron registered neuron-i-0abc.sock".
  virtual std::string ReadyDetail() const = 0;
  // /healthz: OK while the face can answer the kubelet. The HTTP server answering is the
  // default; a face whose kubelet side can wedge on its own says so.
  virtual absl::Status Live() const { return absl::OkStatus(); }
  // The Neuron devices in some pod's allocation or prepared claim, whole or by a core: never reset
  // nor checked (plugin/remediation.h, GET /health's in_use).
  virtual std::set<int> DevicesInUse() const = 0;
};

}  // namespace neuron::plugin
