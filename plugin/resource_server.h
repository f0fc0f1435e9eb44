#pragma once
// One resource's DevicePlugin gRPC server on its own Unix socket
// (docs/kubelet-api.md#registration): options, ListAndWatch as callback-API write reactors
// (docs/style.md#streams-are-reactors), GetPreferredAllocation and Allocate from memory. The server
// runs on gRPC's own threads, so it answers GetDevicePluginOptions while the registering thread
// waits in Register.
//
// Thread-safety: OnView may be called from any thread; construction and destruction belong to
// one owner (the Plugin's lifecycle thread).

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "plugin/config.h"
#include "plugin/metrics.h"
#include "plugin/node_state.h"

namespace neuron::plugin {

class ResourceServer {
 public:
  struct Options {
    Resource resource = Resource::kNeuron;
    std::string root = "/";   // the node's, for the withhold locks (core/node/withhold.h)
    std::string socket_path;  // absolute; an existing file there is replaced
    NonContiguousPolicy noncontiguous = NonContiguousPolicy::kWarn;
    bool cdi = false;
    DeviceNumbering device_numbering = DeviceNumbering::kHost;
    NodeState* state = nullptr;  // outlives the server
    Metrics* metrics = nullptr;  // outlives the server
    // A ListAndWatch stream ended without the server shutting down (the kubelet went away or
    // dropped us): a safety-net restart signal. Runs on a gRPC thread; must not block.
    std::function<void(Resource, std::chrono::steady_clock::time_point started)> on_stream_end;
  };

  // Binds the socket and starts serving.
  static absl::StatusOr<std::unique_ptr<ResourceServer>> Start(Options options);
  // Ends open streams, shuts the server down and removes the socket file if it is still ours.
  ~ResourceServer();
  ResourceServer(const ResourceServer&) = delete;
  ResourceServer& operator=(const ResourceServer&) = delete;

  // A newer view: open streams send a new list when this resource's list changed.
  void OnView(const std::shared_ptr<const NodeView>& view);

  // True while the socket file we bound is still in place (same inode).
  bool SocketPresent() const;

  class Impl;

 private:
  explicit ResourceServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace neuron::plugin
