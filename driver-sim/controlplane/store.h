#pragma once
// The API stand-in's storage: objects of a few kinds by namespace and name, one resourceVersion
// counter for all (as etcd's revision is), optimistic concurrency, label and field selectors,
// and the change history a watch reads. Answers are what the API server sends: the object (or
// list), or a metav1.Status with the HTTP code (API conventions, "Response Status Kind").
//
// Thread-safe: one mutex guards everything; WaitEvents blocks on it without holding it.

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "driver-sim/controlplane/validation.h"
#include "nlohmann/json.hpp"

namespace neuron::sim::apiserver {

// A resource the stand-in serves: resource.k8s.io/v1 resourceslices (cluster-scoped),
// resourceclaims (namespaced, with a status subresource) and deviceclasses (cluster-scoped),
// coordination.k8s.io/v1 leases (namespaced: neuron-dra-api's one writer per node), core v1
// nodes (cluster-scoped: a slice's owner, and the status whose NeuronHealth condition
// neuron-dra-api writes) and core v1 events (namespaced: its Events about the Node).
struct Kind {
  std::string api_version;  // "resource.k8s.io/v1", "coordination.k8s.io/v1", "v1"
  std::string resource;     // "resourceslices"
  std::string kind;         // "ResourceSlice"
  bool namespaced = false;
  bool status_subresource = false;
  std::vector<std::string> field_labels;  // selectable fields besides metadata.name/namespace
};
// The kind served at `api_prefix` ("/apis/resource.k8s.io/v1/" or "/api/v1/") as `resource`.
const Kind* FindKind(std::string_view api_prefix, std::string_view resource);

struct ApiAnswer {
  int code = 200;
  nlohmann::json body;
};

// A metav1.Status answer: status "Failure", `reason` (NotFound, AlreadyExists, Conflict,
// Invalid, BadRequest, Gone, ...), `message`, `details` when given.
ApiAnswer StatusAnswer(int code, std::string_view reason, std::string message,
                       nlohmann::json details = nullptr);

class Store {
 public:
  explicit Store(FeatureGates gates = {}) : gates_(gates) {}
  // As a restart of the server with other --feature-gates would.
  void SetFeatureGates(FeatureGates gates) {
    absl::MutexLock lock(&mu_);
    gates_ = gates;
  }

  // `ns` is "" for cluster-scoped kinds (and for a list across namespaces).
  ApiAnswer Create(const Kind& kind, const std::string& ns, nlohmann::json object);
  ApiAnswer Get(const Kind& kind, const std::string& ns, const std::string& name) const;
  ApiAnswer List(const Kind& kind, const std::string& ns, std::string_view label_selector,
                 std::string_view field_selector) const;
  // `status`: the status subresource (only .status changes) or the main resource (.status is
  // kept). metadata.resourceVersion, when given, must be the current one (else 409 Conflict).
  ApiAnswer Update(const Kind& kind, const std::string& ns, const std::string& name,
                   nlohmann::json object, bool status);
  // `preconditions`: DeleteOptions.preconditions ({"uid", "resourceVersion"}, each optional);
  // a value that is not the object's is 409 Conflict.
  ApiAnswer Delete(const Kind& kind, const std::string& ns, const std::string& name,
                   const nlohmann::json& preconditions = nullptr);

  // Watch events ({"type": ADDED|MODIFIED|DELETED, "object": ...}) of `kind` in `ns` (all when
  // "") after resourceVersion `since`, matching the selectors; waits up to `wait` for the first.
  // `since` 0 (none given): the current objects as ADDED events, at once. 410 Gone when `since`
  // is older than the history kept.
  ApiAnswer Watch(const Kind& kind, const std::string& ns, uint64_t since,
                  std::string_view label_selector, std::string_view field_selector,
                  std::chrono::milliseconds wait) const;

 private:
  struct Event {
    uint64_t rv;
    std::string resource;
    std::string ns;
    std::string type;
    nlohmann::json object;
  };
  using Key = std::tuple<std::string, std::string, std::string>;  // resource, ns, name

  void Record(const Kind& kind, const std::string& ns, std::string type,
              const nlohmann::json& object) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  FeatureGates gates_ ABSL_GUARDED_BY(mu_);
  uint64_t rv_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<Key, nlohmann::json> objects_ ABSL_GUARDED_BY(mu_);
  std::deque<Event> history_ ABSL_GUARDED_BY(mu_);
  uint64_t oldest_rv_ ABSL_GUARDED_BY(mu_) = 1;  // events after this are all in history_
};

// Does `object` match the selectors? Label selector: comma-separated `k=v`, `k==v`, `k!=v`,
// `k`, `!k` (API conventions' equality-based requirements); field selector: `f=v`, `f==v`,
// `f!=v` over metadata.name, metadata.namespace and the kind's field labels. An unsupported
// field or malformed selector is an error message, as the API's 400 says it.
std::string CheckSelectors(const Kind& kind, std::string_view label_selector,
                           std::string_view field_selector);
bool Matches(const nlohmann::json& object, std::string_view label_selector,
             std::string_view field_selector);

}  // namespace neuron::sim::apiserver
