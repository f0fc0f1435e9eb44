#include "driver-sim/controlplane/admission.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>

#include "driver-sim/controlplane/validation.h"

namespace neuron::sim::apiserver {

namespace {

using nlohmann::json;

// The names a policy's CEL may read (the admission documentation's "Variables" table, less
// what the stand-in does not model: params, namespaceObject, authorizer, variables).
const std::set<std::string>& PolicyVariables() {
  static const auto* names = new std::set<std::string>{"request", "object", "oldObject"};
  return *names;
}

// A YAML scalar as JSON: what YAML 1.2's core schema reads as an int, bool or null, else a
// string; quoted scalars ("1", 'true') stay strings.
json Scalar(const YAML::Node& n) {
  const std::string& text = n.Scalar();
  if (n.Tag() == "!") return text;
  if (text == "true" || text == "false") return text == "true";
  if (text == "null" || text == "~" || text.empty()) return nullptr;
  int64_t i = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), i);
  if (ec == std::errc() && end == text.data() + text.size()) return i;
  return text;
}

json FromYaml(const YAML::Node& n) {
  if (n.IsMap()) {
    json o = json::object();
    for (const auto& kv : n) o[kv.first.as<std::string>()] = FromYaml(kv.second);
    return o;
  }
  if (n.IsSequence()) {
    json a = json::array();
    for (const auto& item : n) a.push_back(FromYaml(item));
    return a;
  }
  return n.IsNull() ? json() : Scalar(n);
}

// JSON as CEL's structured data; a double (no field the policies read has one) is null.
cel::Data ToData(const json& j) {
  using Type = cel::Data::Type;
  if (j.is_boolean()) return {.type = Type::kBool, .b = j.get<bool>()};
  if (j.is_number_integer()) return {.type = Type::kInt, .i = j.get<int64_t>()};
  if (j.is_string()) return {.type = Type::kString, .s = j.get<std::string>()};
  cel::Data d;
  if (j.is_array()) {
    d.type = Type::kList;
    for (const json& item : j) d.list.push_back(ToData(item));
  } else if (j.is_object()) {
    d.type = Type::kMap;
    for (const auto& [k, v] : j.items()) d.map[k] = ToData(v);
  }
  return d;
}

std::string ApiGroup(const Kind& kind) {
  const size_t slash = kind.api_version.find('/');
  return slash == std::string::npos ? "" : kind.api_version.substr(0, slash);
}

std::string ApiVersion(const Kind& kind) {
  const size_t slash = kind.api_version.find('/');
  return slash == std::string::npos ? kind.api_version : kind.api_version.substr(slash + 1);
}

// The AdmissionRequest (k8s.io/api admission/v1) the policy's `request` is.
json RequestJson(const AdmissionRequest& r) {
  json extra = json::object();
  for (const auto& [k, v] : r.user->extra) extra[k] = v;
  return {
      {"operation", r.operation},
      {"kind",
       {{"group", ApiGroup(*r.kind)}, {"version", ApiVersion(*r.kind)}, {"kind", r.kind->kind}}},
      {"resource",
       {{"group", ApiGroup(*r.kind)},
        {"version", ApiVersion(*r.kind)},
        {"resource", r.kind->resource}}},
      {"subResource", r.status ? "status" : ""},
      {"name", r.name},
      {"namespace", r.ns},
      {"userInfo", {{"username", r.user->username}, {"groups", r.user->groups}, {"extra", extra}}},
      {"dryRun", false}};
}

bool Listed(const json& list, const std::string& value) {
  if (!list.is_array()) return false;
  return std::any_of(list.begin(), list.end(),
                     [&](const json& v) { return v == "*" || v == value; });
}

// Whether a resourceRules entry names the request: "nodes/status" the status subresource,
// "*/status" any resource's, "*" every resource but no subresource.
bool RuleMatches(const json& rule, const AdmissionRequest& r) {
  if (!Listed(rule.value("apiGroups", json()), ApiGroup(*r.kind)) ||
      !Listed(rule.value("apiVersions", json()), ApiVersion(*r.kind)) ||
      !Listed(rule.value("operations", json()), r.operation)) {
    return false;
  }
  const std::string resource = r.kind->resource + (r.status ? "/status" : "");
  bool named = false;
  for (const json& v : rule.value("resources", json::array())) {
    const std::string want = v.is_string() ? v.get<std::string>() : "";
    named |= want == resource || (want == "*" && !r.status) || want == "*/*" ||
             (want == "*/status" && r.status);
  }
  const json names = rule.value("resourceNames", json::array());
  return named && (names.empty() || Listed(names, r.name));
}

// The HTTP code of a validation's reason (metav1.StatusReason).
int Code(const std::string& reason) {
  if (reason == "Forbidden") return 403;
  if (reason == "Unauthorized") return 401;
  if (reason == "RequestEntityTooLarge") return 413;
  return 422;
}

// The fields a policy may have and that the stand-in evaluates; any other is refused by name.
absl::Status CheckModelled(const json& o, const std::string& name) {
  static const std::set<std::string> kSpec = {"failurePolicy", "matchConstraints",
                                              "matchConditions", "validations"};
  static const std::set<std::string> kConstraints = {"resourceRules", "matchPolicy",
                                                     "namespaceSelector", "objectSelector"};
  static const std::set<std::string> kValidation = {"expression", "message", "reason"};
  const auto check = [&](const json& j, const std::set<std::string>& known,
                         const std::string& where) -> absl::Status {
    for (const auto& [k, v] : j.items()) {
      // The API server defaults both selectors to {}: every namespace, every object.
      const bool selector = k == "namespaceSelector" || k == "objectSelector";
      if (known.contains(k) && (!selector || v.empty())) continue;
      return absl::InvalidArgumentError(Cat("ValidatingAdmissionPolicy ", name, ": ", where, k,
                                            " is not evaluated by the API stand-in"));
    }
    return absl::OkStatus();
  };
  const json spec = o.value("spec", json::object());
  if (absl::Status s = check(spec, kSpec, "spec."); !s.ok()) return s;
  const json constraints = spec.value("matchConstraints", json::object());
  if (absl::Status s = check(constraints, kConstraints, "spec.matchConstraints."); !s.ok()) {
    return s;
  }
  for (const json& v : spec.value("validations", json::array())) {
    if (absl::Status s = check(v, kValidation, "spec.validations[]."); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<cel::CelExpression> CompileIn(const json& item, const std::string& policy) {
  absl::StatusOr<cel::CelExpression> e =
      cel::CelExpression::CompileOver(item.value("expression", ""), PolicyVariables());
  if (!e.ok()) {
    return absl::InvalidArgumentError(
        Cat("ValidatingAdmissionPolicy ", policy, ": ", std::string{e.status().message()}));
  }
  return e;
}

absl::StatusOr<AdmissionPolicies::Policy> ParsePolicy(const json& o) {
  AdmissionPolicies::Policy p;
  p.name = o.value("/metadata/name"_json_pointer, std::string());
  if (absl::Status s = CheckModelled(o, p.name); !s.ok()) return s;
  const json spec = o.value("spec", json::object());
  p.fail = spec.value("failurePolicy", "Fail") != "Ignore";
  p.rules = spec.value("/matchConstraints/resourceRules"_json_pointer, json::array());
  for (const json& c : spec.value("matchConditions", json::array())) {
    absl::StatusOr<cel::CelExpression> e = CompileIn(c, p.name);
    if (!e.ok()) return e.status();
    p.conditions.push_back(*std::move(e));
  }
  for (const json& v : spec.value("validations", json::array())) {
    absl::StatusOr<cel::CelExpression> e = CompileIn(v, p.name);
    if (!e.ok()) return e.status();
    std::string message = v.value("message", "");
    if (message.empty()) message = Cat("failed expression: ", e->text());
    p.validations.push_back({*std::move(e), std::move(message), v.value("reason", "Invalid")});
  }
  return p;
}

// Binds `binding` to its policy among `policies`; InvalidArgument for what is not modelled.
absl::Status Bind(const json& binding, std::vector<AdmissionPolicies::Policy>& policies) {
  const std::string name = binding.value("/metadata/name"_json_pointer, std::string());
  const json spec = binding.value("spec", json::object());
  for (const auto& [k, v] : spec.items()) {
    if (k != "policyName" && k != "validationActions" && !(k == "matchResources" && v.empty())) {
      return absl::InvalidArgumentError(Cat("ValidatingAdmissionPolicyBinding ", name, ": spec.", k,
                                            " is not evaluated by the API stand-in"));
    }
  }
  const std::string policy = spec.value("policyName", "");
  for (AdmissionPolicies::Policy& p : policies) {
    if (p.name != policy) continue;
    p.binding = name;
    p.deny = Listed(spec.value("validationActions", json::array()), "Deny");
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      Cat("ValidatingAdmissionPolicyBinding ", name, ": no policy ", policy, " loaded"));
}

ApiAnswer Denied(const AdmissionPolicies::Policy& p, int code, const std::string& reason,
                 const std::string& message) {
  return StatusAnswer(code, reason,
                      Cat("ValidatingAdmissionPolicy '", p.name, "' with binding '", p.binding,
                          "' denied request: ", message));
}

// One policy's verdict on `variables`: nullopt to admit.
std::optional<ApiAnswer> Evaluate(const AdmissionPolicies::Policy& p,
                                  const cel::Variables& variables) {
  for (const cel::CelExpression& c : p.conditions) {
    absl::StatusOr<bool> applies = c.Evaluate(variables);
    if (!applies.ok()) {
      if (!p.fail) return std::nullopt;
      return Denied(
          p, 403, "Forbidden",
          Cat("failed to evaluate match condition: ", std::string{applies.status().message()}));
    }
    if (!*applies) return std::nullopt;
  }
  for (const AdmissionPolicies::Validation& v : p.validations) {
    absl::StatusOr<bool> ok = v.expression.Evaluate(variables);
    if (!ok.ok()) {
      if (!p.fail) continue;
      return Denied(p, 403, "Forbidden",
                    Cat("expression '", v.expression.text(),
                        "' resulted in error: ", std::string{ok.status().message()}));
    }
    if (!*ok) return Denied(p, Code(v.reason), v.reason, v.message);
  }
  return std::nullopt;
}

}  // namespace

UserInfo ServiceAccountUser(const std::string& ns, const std::string& name,
                            const std::string& node) {
  UserInfo u;
  u.username = Cat("system:serviceaccount:", ns, ":", name);
  u.groups = {"system:serviceaccounts", Cat("system:serviceaccounts:", ns), "system:authenticated"};
  u.extra[kNodeNameExtra] = {node};
  return u;
}

absl::StatusOr<std::vector<json>> LoadManifest(const std::string& path) {
  try {
    std::vector<json> out;
    for (const YAML::Node& doc : YAML::LoadAllFromFile(path)) {
      if (doc.IsMap()) out.push_back(FromYaml(doc));
    }
    return out;
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(Cat(path, ": ", e.what()));
  }
}

absl::StatusOr<AdmissionPolicies> AdmissionPolicies::Load(const std::vector<json>& objects) {
  AdmissionPolicies out;
  for (const json& o : objects) {
    if (o.value("kind", "") != "ValidatingAdmissionPolicy") continue;
    absl::StatusOr<Policy> p = ParsePolicy(o);
    if (!p.ok()) return p.status();
    out.policies_.push_back(*std::move(p));
  }
  for (const json& o : objects) {
    if (o.value("kind", "") != "ValidatingAdmissionPolicyBinding") continue;
    if (absl::Status s = Bind(o, out.policies_); !s.ok()) return s;
  }
  return out;
}

std::optional<ApiAnswer> AdmissionPolicies::Admit(const AdmissionRequest& r) const {
  if (policies_.empty() || r.user == nullptr) return std::nullopt;
  cel::Variables variables;
  variables["request"] = ToData(RequestJson(r));
  variables["object"] = r.object != nullptr ? ToData(*r.object) : cel::Data{};
  variables["oldObject"] = r.old_object != nullptr ? ToData(*r.old_object) : cel::Data{};
  for (const Policy& p : policies_) {
    if (p.binding.empty() || !p.deny) continue;  // unbound, or Warn/Audit only
    if (std::none_of(p.rules.begin(), p.rules.end(),
                     [&](const json& rule) { return RuleMatches(rule, r); })) {
      continue;
    }
    if (std::optional<ApiAnswer> denied = Evaluate(p, variables)) return denied;
  }
  return std::nullopt;
}

}  // namespace neuron::sim::apiserver
