#pragma once
// A small Kubernetes REST client: JSON over HTTPS with a bearer token, what neuron-dra-api needs
// to publish ResourceSlices and read ResourceClaims (plugin/kubeapi/README.md).
//
// Built on libcurl (HTTP/1.1 and TLS: connection set-up, certificate checks against the cluster
// CA, chunked bodies, timeouts) and nlohmann-json (parsing and writing), both from Debian. What
// we no longer own by using them: the HTTP client framing and TLS verification (libcurl, linked
// against OpenSSL), JSON parsing (nlohmann-json). What stays ours: the credentials (in-cluster
// config, the token re-read when the projected token rotates) and the mapping of the API's
// answers to absl::Status.
//
// Errors (the API's Status `message` is the status message when the answer carries one):
//   404 NotFound; 409 AlreadyExists for reason "AlreadyExists" (a create of an existing name),
//   otherwise Aborted (a stale resourceVersion: re-read and retry); 400 and 422
//   InvalidArgument; 401 Unauthenticated; 403 PermissionDenied; 5xx, 429 and a failed
//   connection Unavailable; a request past its timeout DeadlineExceeded; an answer that is not
//   JSON DataLoss.
//
// Thread-safe: every request has its own libcurl handle; the token cache is guarded.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "http/file_identity.h"
#include "nlohmann/json.hpp"

namespace neuron::kubeapi {

// The Content-Types of the API's patches (API concepts, "Patch operations").
inline constexpr std::string_view kStrategicMergePatch = "application/strategic-merge-patch+json";
inline constexpr std::string_view kMergePatch = "application/merge-patch+json";

struct ClientConfig {
  std::string server;      // "https://10.96.0.1:443" (or "http://..." for a test stand-in)
  std::string token_file;  // bearer token, re-read when it changes; "" sends none
  std::string ca_file;     // PEM bundle the server's certificate must chain to; "" = system CAs
  std::chrono::milliseconds timeout{10000};         // each request, whole
  std::chrono::milliseconds connect_timeout{3000};  // within `timeout`
};

// The in-cluster configuration every Kubernetes client uses in a pod: the API server at
// https://KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT (IPv6 hosts bracketed), the
// service-account token and CA under /var/run/secrets/kubernetes.io/serviceaccount/.
// FailedPrecondition when the environment variables are missing (not in a pod).
absl::StatusOr<ClientConfig> InClusterConfig();

class Client {
 public:
  explicit Client(ClientConfig config);

  // `path` is the request target below the server: "/apis/resource.k8s.io/v1/resourceslices".
  absl::StatusOr<nlohmann::json> Get(std::string_view path) const;
  absl::StatusOr<nlohmann::json> Post(std::string_view path, const nlohmann::json& body) const;
  absl::StatusOr<nlohmann::json> Put(std::string_view path, const nlohmann::json& body) const;
  // A patch, `content_type` saying which kind: kStrategicMergePatch merges a list by its merge
  // key (a Node's status.conditions by type: one condition changes, the others stay), a JSON
  // merge patch (RFC 7386) would replace the list whole.
  absl::StatusOr<nlohmann::json> Patch(std::string_view path, const nlohmann::json& body,
                                       std::string_view content_type) const;
  absl::StatusOr<nlohmann::json> Delete(std::string_view path) const;
  // With DeleteOptions, e.g. {"preconditions": {"uid", "resourceVersion"}}: the server refuses
  // (Aborted, 409) when the object is no longer the one the caller saw.
  absl::StatusOr<nlohmann::json> Delete(std::string_view path, const nlohmann::json& options) const;
  // A watch (`path` with ?watch=1&resourceVersion=N): the events the answer carried, one JSON
  // object per line ({"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR, "object"}), once the server
  // ends the stream or the request's timeout passes (DeadlineExceeded then; ask for
  // timeoutSeconds below it). Watch again from the last object's resourceVersion.
  absl::StatusOr<std::vector<nlohmann::json>> Watch(std::string_view path) const;

  const ClientConfig& config() const { return config_; }

 private:
  absl::StatusOr<nlohmann::json> Request(std::string_view method, std::string_view path,
                                         const nlohmann::json* body,
                                         std::string_view content_type = "application/json") const;
  // The answer's body when the status is 2xx.
  absl::StatusOr<std::string> Exchange(std::string_view method, std::string_view path,
                                       const nlohmann::json* body,
                                       std::string_view content_type = "application/json") const;
  // The token, re-read when the file changed (kubelet rotates projected tokens by swapping the
  // volume's ..data link, which changes the file's identity). Unavailable when unreadable.
  absl::StatusOr<std::string> Token() const;

  const ClientConfig config_;
  mutable absl::Mutex mu_;
  mutable FileIdentity token_identity_ ABSL_GUARDED_BY(mu_);
  mutable std::string token_ ABSL_GUARDED_BY(mu_);
};

// The HTTP status and the API's Status `message` (or the body's first line) as an absl::Status,
// mapped as the header above says. OK for 2xx.
absl::Status StatusFromHttp(int64_t http_status, std::string_view body);

}  // namespace neuron::kubeapi
