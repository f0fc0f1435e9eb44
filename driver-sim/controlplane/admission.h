#pragma once
// The API stand-in's admission: who a bearer token is (UserInfo, as the authenticator hands it
// to admission), and the ValidatingAdmissionPolicies (admissionregistration.k8s.io/v1) loaded
// from a manifest, evaluated on every write as kube-apiserver's validating admission policy
// plugin does. The policy is read from the file deploy/ ships and its CEL from
// `validations[].expression`, compiled with core's CEL subset (core/cel/cel_subset.h), so that a
// test proves the shipped policy rather than a copy of it.
//
// What is evaluated (the Kubernetes API reference, "ValidatingAdmissionPolicy v1", and the
// admission documentation, "Validating Admission Policy"):
//   - spec.matchConstraints.resourceRules: apiGroups, apiVersions, operations (CREATE, UPDATE,
//     DELETE; a PATCH is an UPDATE), resources ("nodes", "nodes/status", "*", "*/status"),
//     resourceNames; a request matches when one rule does;
//   - spec.matchConditions: every expression true, or the policy does not apply;
//   - spec.validations: each expression must be true, else the request is denied with its
//     `message` (default: "failed expression: <expression>") and the HTTP code of its `reason`
//     (Invalid 422, the default; Forbidden 403; Unauthorized 401; RequestEntityTooLarge 413):
//     "ValidatingAdmissionPolicy '<policy>' with binding '<binding>' denied request: <message>";
//   - spec.failurePolicy: an expression that fails to evaluate denies (Fail, the default) or is
//     skipped (Ignore);
//   - a ValidatingAdmissionPolicyBinding per policy (spec.policyName), whose
//     spec.validationActions must hold Deny for a failure to deny (Warn and Audit alone let the
//     request through).
// The variables are `request` (an AdmissionRequest: operation, resource, subResource, name,
// namespace, userInfo, dryRun), `object` and `oldObject` (null where the operation has none).
// Anything else a policy or binding asks for (paramKind, variables, messageExpression,
// auditAnnotations, excludeResourceRules, a non-empty namespaceSelector, objectSelector or
// matchResources, paramRef) is refused when loading, never ignored.
//
// Thread-safe after Load: Admit only reads.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cel/cel_subset.h"
#include "driver-sim/controlplane/store.h"
#include "nlohmann/json.hpp"

namespace neuron::sim::apiserver {

// Who made a request: authentication's answer (k8s.io/apiserver user.Info).
struct UserInfo {
  std::string username;
  std::vector<std::string> groups = {};
  std::map<std::string, std::vector<std::string>> extra = {};
};

// The extra a projected service-account token of a pod carries: the node the pod runs on
// (since Kubernetes 1.32; the ServiceAccountTokenPodNodeInfo feature).
inline constexpr char kNodeNameExtra[] = "authentication.kubernetes.io/node-name";

// A service account's token bound to a pod on `node`, as the kubelet projects it.
UserInfo ServiceAccountUser(const std::string& ns, const std::string& name,
                            const std::string& node);

// One write, as admission sees it.
struct AdmissionRequest {
  std::string operation;  // CREATE, UPDATE, DELETE
  const Kind* kind = nullptr;
  bool status = false;  // the status subresource
  std::string ns;
  std::string name;
  const UserInfo* user = nullptr;
  const nlohmann::json* object = nullptr;      // null for DELETE
  const nlohmann::json* old_object = nullptr;  // null for CREATE
};

// The objects of a YAML manifest (one document each, "---" between), as JSON. InvalidArgument
// naming the file when it cannot be read or parsed.
absl::StatusOr<std::vector<nlohmann::json>> LoadManifest(const std::string& path);

class AdmissionPolicies {
 public:
  // The ValidatingAdmissionPolicies and their bindings among `objects` (other kinds are left
  // out). InvalidArgument naming the policy and what the stand-in does not evaluate, or the
  // expression outside the CEL subset.
  static absl::StatusOr<AdmissionPolicies> Load(const std::vector<nlohmann::json>& objects);

  // nullopt when every policy that applies admits the request; otherwise the API's answer.
  std::optional<ApiAnswer> Admit(const AdmissionRequest& request) const;

  size_t size() const { return policies_.size(); }

  struct Validation {
    cel::CelExpression expression;
    std::string message;
    std::string reason;
  };
  // nlohmann::json's and std::string's members may throw in principle (allocation); a Policy is
  // only built in Load, whose callers handle a failed start.
  struct Policy {  // NOLINT(bugprone-exception-escape)
    std::string name;
    std::string binding;   // "" when no binding names it: the policy does nothing
    bool deny = false;     // the binding's validationActions hold Deny
    bool fail = true;      // failurePolicy Fail (an evaluation error denies)
    nlohmann::json rules;  // matchConstraints.resourceRules
    std::vector<cel::CelExpression> conditions = {};
    std::vector<Validation> validations = {};
  };

 private:
  std::vector<Policy> policies_;
};

}  // namespace neuron::sim::apiserver
