#pragma once
// One DRA driver's kubelet plugin sockets (docs/kubelet-api.md#dra), for neuron.aws.com and
// likewise for efa.neuron.aws.com (with a pod UID, dra-<uid>.sock and <driver>-<uid>-reg.sock, as
// the library's RollingUpdate names them):
//   KUBELET_DIR/plugins/neuron.aws.com/dra.sock       DRAPlugin v1 and v1beta1
//                                                     (NodePrepareResources,
//                                                     NodeUnprepareResources) and DRAResourceHealth
//                                                     v1 and v1alpha1 (NodeWatchResources)
//   KUBELET_DIR/plugins_registry/neuron.aws.com-reg.sock
//                                                     Registration (GetInfo,
//                                                     NotifyRegistrationStatus)
// The kubelet's plugin watcher finds the registration socket by watching plugins_registry, calls
// GetInfo, dials the endpoint it names and reports with NotifyRegistrationStatus. Both sockets are
// 0600 (only the kubelet, as root, reaches them). The health streams send every device's health
// of its pool at once and again on every change of the NodeView: HEALTHY, UNHEALTHY, or UNKNOWN
// when the evidence cannot be read (never HEALTHY then). A NeuronCore has its device's health;
// neuron-node is UNHEALTHY while any device is unhealthy or absent, else UNKNOWN while any is
// unknown. neuron.aws.com's stream also carries the EFAs, for claims prepared while they were
// devices of its pool (before EFA had a driver of its own).
// Freshness (the library's kubeletplugin/health.go does the same): last_updated_time is when the
// evidence was read (NodeState::evidence_time), health_check_timeout_seconds is `stale_after`,
// and an unchanged list is sent again every third of it only when the evidence was read again
// since the last send. A node watcher that stalls thus stops the stream, and the kubelet takes the
// devices as UNKNOWN once `stale_after` has passed; it never hears HEALTHY from a stuck reader.
//
// Thread-safety: Start/destructor by one owner; OnView and the accessors from any thread.

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "plugin/dra/driver.h"
#include "plugin/node_state.h"

namespace neuron::plugin::dra {

struct ServerOptions {
  std::string_view driver_name = kDriverName;  // one of kDriverNames: whose sockets and health
  std::string kubelet_dir;
  std::string node_name;
  Driver* driver = nullptr;    // not owned
  NodeState* state = nullptr;  // not owned
  // --dra.partitionable: the health streams also report the NeuronCores and neuron-node the
  // pool offers (slice.h).
  bool partitionable = false;
  // health.stale_after (config.h).
  std::chrono::milliseconds stale_after{30000};
  std::string pod_uid = {};  // names the sockets (config.h); "" for the fixed names
};

// The socket paths of `driver` under a kubelet directory, for an instance with `pod_uid` ("" for
// none).
std::string DraSocketPath(const std::string& kubelet_dir, const std::string& pod_uid = "",
                          std::string_view driver = kDriverName);
std::string RegistrationSocketPath(const std::string& kubelet_dir, const std::string& pod_uid = "",
                                   std::string_view driver = kDriverName);

// The liveness probe's question (the example driver's probe asks the same): GetInfo on the
// registration socket and an empty NodePrepareResources on the DRA socket, each within
// `deadline`. Unavailable naming the socket that did not answer; a socket being served again
// after a deletion fails until it is (within a second), inside the probe's failure threshold.
absl::Status ProbeSockets(const std::string& kubelet_dir, const std::string& pod_uid = "",
                          std::string_view driver = kDriverName,
                          std::chrono::milliseconds deadline = std::chrono::milliseconds(400));

class Server {
 public:
  // Removes stale sockets of ours, then serves both. Fails when a socket path is too long or
  // cannot be bound.
  static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options);
  ~Server();  // ends the health streams, stops serving, removes our sockets
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Health streams send the new picture.
  void OnView(const std::shared_ptr<const NodeView>& view);
  // Both sockets still exist and are ours (a kubelet clean-up or a person may delete them).
  bool SocketsPresent() const;
  // The kubelet's last NotifyRegistrationStatus said registered.
  bool registered() const;

 private:
  class Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace neuron::plugin::dra
