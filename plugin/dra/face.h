#pragma once
// The DRA face (docs/kubelet-api.md#dra): no device-plugin resources; the ResourceSlice document
// (plugin/dra/slice.h) that the unprivileged neuron-dra-api publishes, and per driver of ours
// (neuron.aws.com, and efa.neuron.aws.com unless --dra.efa=false) the prepare/unprepare driver
// (plugin/dra/driver.h) and the kubelet-facing sockets (plugin/dra/server.h), served again when
// they vanish.

#include <memory>
#include <optional>
#include <string>

#include "plugin/config.h"
#include "plugin/dra/slice.h"
#include "plugin/face.h"
#include "plugin/node_state.h"
#include "plugin/node_watcher.h"

namespace neuron::plugin::dra {

class DraFace final : public Face {
 public:
  // `state` and `watcher` outlive the face.
  DraFace(Config config, NodeState* state, NodeWatcher* watcher);
  ~DraFace() override;  // Stop()s
  DraFace(const DraFace&) = delete;
  DraFace& operator=(const DraFace&) = delete;

  absl::Status Start() override;
  void Stop() override;
  bool Ready() const override;
  std::string ReadyDetail() const override;
  // Both sockets of each driver answer, as the kubelet calls them (ProbeSockets, server.h).
  absl::Status Live() const override;
  // The devices of every prepared claim (a claim on neuron-node holds them all).
  std::set<int> DevicesInUse() const override;

  // GET /dra/resourceslice (docs/kubelet-api.md#dra-slice): 503 before the first scan; 304 while
  // `unless` is the current generation.
  SliceState::Document Slice(std::optional<uint64_t> unless) const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace neuron::plugin::dra
