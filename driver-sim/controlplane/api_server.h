#pragma once
// The API stand-in: a small kube-apiserver for resource.k8s.io/v1 ResourceSlices,
// ResourceClaims (with their status subresource) and DeviceClasses, and coordination.k8s.io/v1
// Leases, written from the Kubernetes API reference and API conventions for what the DRA driver
// and the simulator use (docs/kubelet-api.md#resourceslices). It speaks HTTPS with a CA it makes
// (driver-sim/controlplane/test_ca.h), or plain HTTP when asked, through our http/ server.
//
//   GET    /apis/resource.k8s.io/v1/{resource}                         list (labelSelector,
//          /apis/resource.k8s.io/v1/namespaces/{ns}/{resource}          fieldSelector), or watch
//                                                                       (watch=1&resourceVersion=N)
//   POST   same                                                        create (201)
//   GET, PUT, DELETE  .../{resource}/{name}                             get, update, delete
//                                                                       (DeleteOptions'
//                                                                       preconditions)
//   PUT    .../resourceclaims/{name}/status                            status subresource
//   PATCH  .../{name}[/status]                                         merge and strategic merge
//                                                                       patches (patch.h)
//   the same for core v1 nodes (/api/v1/nodes, with status): a slice names its Node as owner,
//   neuron-dra-api patches its NeuronHealth condition; core v1 events
//   (/api/v1/namespaces/{ns}/events): its Events about the Node; and coordination.k8s.io/v1
//   leases (/apis/coordination.k8s.io/v1/namespaces/{ns}/leases): neuron-dra-api's one writer
//   per node (plugin/kubeapi/lease.h)
//
// Authentication: `Authorization: Bearer T` with T one of `tokens` (anything else: 401);
// `read_only_tokens` may only read (writes: 403), as RBAC would answer; `service_account_tokens`
// are a service account's tokens bound to a pod on a node (admission.h: the user admission sees,
// with the node's name among its extra), which may read and write. Every write passes the
// ValidatingAdmissionPolicies of `admission` (admission.h) before it is stored. Errors are
// metav1.Status objects with the API's reasons and codes (store.h, validation.h).
//
// Watch: the answer holds one JSON event per line ({"type","object"}) as the real server
// streams them, but the stand-in ends the watch once it has sent the events that were there or
// arrived within timeoutSeconds (default 30, at most 60). The real server also ends watches
// (after timeoutSeconds, or at any time); clients watch again from the last resourceVersion.
//
// SetReachable(false) closes the listening socket and every connection (clients then get
// "connection refused", as from an API server that is down); SetReachable(true) listens again
// on the same port.
//
// Thread-safe.

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "driver-sim/controlplane/admission.h"
#include "driver-sim/controlplane/store.h"
#include "driver-sim/controlplane/test_ca.h"
#include "http/http_server.h"

namespace neuron::sim::apiserver {

class ApiServer {
 public:
  struct Options {
    // host:port (port 0: a free one). url() names 127.0.0.1, the address the certificate is for.
    std::string listen = "127.0.0.1:0";
    bool tls = true;
    std::string cert_dir;  // where the CA and server certificate are written (tls only)
    std::set<std::string> tokens;
    std::set<std::string> read_only_tokens;
    std::map<std::string, UserInfo> service_account_tokens;  // token -> ServiceAccountUser(...)
    // ValidatingAdmissionPolicies and their bindings (LoadManifest of a deploy/ file); Start
    // refuses what AdmissionPolicies::Load refuses.
    std::vector<nlohmann::json> admission;
    FeatureGates feature_gates;  // DropDisabledFields (validation.h) on ResourceSlice writes
  };

  static absl::StatusOr<std::unique_ptr<ApiServer>> Start(Options options);
  ~ApiServer();

  std::string url() const;      // "https://127.0.0.1:PORT"
  std::string ca_file() const;  // "" for plain HTTP
  int port() const { return port_; }
  Store& store() { return store_; }

  absl::Status SetReachable(bool reachable);

  // The answer to one request (exposed for the server's handler; tests call it through HTTP).
  HttpResponse Handle(const HttpRequest& request);

 private:
  explicit ApiServer(Options options)
      : options_(std::move(options)), store_(options_.feature_gates) {}
  absl::Status Listen(const std::string& address);
  HttpResponse Serve(const HttpRequest& request);  // Handle without its guard
  // The user of the request's bearer token; `may_write` false for a read-only one.
  std::optional<UserInfo> Authenticate(const HttpRequest& request, bool* may_write) const;

  const Options options_;
  AdmissionPolicies admission_;  // set by Start, read-only after
  CaFiles ca_;
  std::atomic<int> port_{0};  // set by Listen; the same port again after SetReachable(true)
  Store store_;
  std::mutex mu_;  // guards server_
  std::unique_ptr<HttpServer> server_;
};

}  // namespace neuron::sim::apiserver
