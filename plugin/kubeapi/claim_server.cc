#include "plugin/kubeapi/claim_server.h"

#include <string_view>

#include "fmt/format.h"

namespace neuron::kubeapi {

namespace {

using nlohmann::json;

HttpResponse Text(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

// Namespaces are DNS labels and claim names DNS subdomains: lower-case alphanumerics, '-' and
// '.'. Checked before the names become part of the API path.
bool IsNameLike(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) return false;
  }
  return s.front() != '-' && s.front() != '.';
}

// The members `keys` of `from` that are present, in a new object.
json Pick(const json& from, std::initializer_list<const char*> keys) {
  json out = json::object();
  if (!from.is_object()) return out;
  for (const char* k : keys) {
    if (from.contains(k)) out[k] = from[k];
  }
  return out;
}

}  // namespace

json PruneClaim(const json& claim) {
  json out = {{"metadata", Pick(claim.value("metadata", json()), {"namespace", "name", "uid"})},
              {"status", json::object()}};
  const json* alloc = nullptr;
  if (claim.contains("status") && claim["status"].is_object() &&
      claim["status"].contains("allocation") && claim["status"]["allocation"].is_object()) {
    alloc = &claim["status"]["allocation"];
  }
  if (alloc == nullptr) return out;
  const json devices = alloc->value("devices", json::object());
  json results = json::array();
  for (const json& r : devices.value("results", json::array())) {
    results.push_back(Pick(r, {"request", "driver", "pool", "device", "adminAccess"}));
  }
  json config = json::array();
  for (const json& c : devices.value("config", json::array())) {
    json entry = Pick(c, {"source", "requests"});
    if (c.contains("opaque")) entry["opaque"] = Pick(c["opaque"], {"driver", "parameters"});
    config.push_back(std::move(entry));
  }
  json pruned_devices = {{"results", std::move(results)}};
  if (!config.empty()) pruned_devices["config"] = std::move(config);
  out["status"]["allocation"] = {{"devices", std::move(pruned_devices)}};
  return out;
}

HttpResponse ServeClaim(const Client& client, const HttpRequest& request) {
  constexpr std::string_view kPrefix = "/claims/";
  const std::string_view path = request.path;
  if (!path.starts_with(kPrefix)) return Text(404, "not found\n");
  const std::string_view rest = path.substr(kPrefix.size());
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos) return Text(404, "not found\n");
  const std::string_view ns = rest.substr(0, slash);
  const std::string_view name = rest.substr(slash + 1);
  if (!IsNameLike(ns) || !IsNameLike(name)) return Text(404, "not found\n");
  absl::StatusOr<json> claim =
      client.Get(fmt::format("/apis/resource.k8s.io/v1/namespaces/{}/resourceclaims/{}", ns, name));
  if (absl::IsNotFound(claim.status())) {
    return Text(404, fmt::format("resourceclaim {}/{} not found\n", ns, name));
  }
  if (!claim.ok()) {
    std::string reason(claim.status().message());
    std::replace(reason.begin(), reason.end(), '\n', ' ');
    return Text(503, fmt::format("cannot read resourceclaim {}/{}: {}\n", ns, name, reason));
  }
  HttpResponse r;
  r.content_type = "application/json";
  try {
    r.body = PruneClaim(*claim).dump();
  } catch (const json::exception& e) {  // a field of an unexpected type
    return Text(503, fmt::format("resourceclaim {}/{} is malformed: {}\n", ns, name, e.what()));
  }
  return r;
}

}  // namespace neuron::kubeapi
