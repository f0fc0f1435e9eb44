#include "plugin/dra/claim_source.h"

#include "fmt/format.h"
#include "http/local_client.h"
#include "plugin/dra/slice.h"

namespace neuron::plugin::dra {
namespace {

using nlohmann::json;

absl::Status Bad(std::string_view field, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("claim answer: {} {}", field, what));
}

absl::StatusOr<std::string> String(const json& object, const char* key, std::string_view where) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_string()) {
    return Bad(fmt::format("{}.{}", where, key), "is missing or not a string");
  }
  return it->get<std::string>();
}

absl::StatusOr<AllocationResult> ParseResult(const json& r, size_t i) {
  const std::string where = fmt::format("results[{}]", i);
  if (!r.is_object()) return Bad(where, "is not an object");
  AllocationResult out;
  for (auto [key, field] : {std::pair{"request", &out.request}, std::pair{"driver", &out.driver},
                            std::pair{"pool", &out.pool}, std::pair{"device", &out.device}}) {
    absl::StatusOr<std::string> v = String(r, key, where);
    if (!v.ok()) return v.status();
    *field = *std::move(v);
  }
  if (const auto admin = r.find("adminAccess"); admin != r.end() && !admin->is_null()) {
    if (!admin->is_boolean()) return Bad(where + ".adminAccess", "is not a boolean");
    out.admin_access = admin->get<bool>();
  }
  return out;
}

absl::StatusOr<ClaimConfig> ParseConfig(const json& c, size_t i) {
  const std::string where = fmt::format("config[{}]", i);
  if (!c.is_object()) return Bad(where, "is not an object");
  ClaimConfig out;
  if (c.contains("source")) {
    absl::StatusOr<std::string> s = String(c, "source", where);
    if (!s.ok()) return s.status();
    out.source = *s;
  }
  if (c.contains("requests")) {
    const json& reqs = c["requests"];
    if (!reqs.is_array()) return Bad(where + ".requests", "is not an array");
    for (const json& r : reqs) {
      if (!r.is_string()) return Bad(where + ".requests", "holds a non-string");
      out.requests.push_back(r.get<std::string>());
    }
  }
  // Only opaque configuration exists in the API today; anything else is not ours to read.
  if (!c.contains("opaque")) return out;
  const json& opaque = c["opaque"];
  if (!opaque.is_object()) return Bad(where + ".opaque", "is not an object");
  absl::StatusOr<std::string> driver = String(opaque, "driver", where + ".opaque");
  if (!driver.ok()) return driver.status();
  out.driver = *driver;
  const auto params = opaque.find("parameters");
  if (params == opaque.end() || !params->is_object()) {
    return Bad(where + ".opaque.parameters", "is missing or not an object");
  }
  out.parameters = *params;
  return out;
}

absl::Status ParseAllocation(const json& allocation, ResourceClaim* claim) {
  if (!allocation.is_object()) return Bad("status.allocation", "is not an object");
  const auto devices = allocation.find("devices");
  if (devices == allocation.end()) return absl::OkStatus();  // allocated, but no devices
  if (!devices->is_object()) return Bad("status.allocation.devices", "is not an object");
  const json results = devices->value("results", json::array());
  const json config = devices->value("config", json::array());
  if (!results.is_array() || results.size() > kMaxResults) {
    return Bad("results", fmt::format("is not an array of at most {}", kMaxResults));
  }
  if (!config.is_array() || config.size() > kMaxConfigs) {
    return Bad("config", fmt::format("is not an array of at most {}", kMaxConfigs));
  }
  for (size_t i = 0; i < results.size(); ++i) {
    absl::StatusOr<AllocationResult> r = ParseResult(results[i], i);
    if (!r.ok()) return r.status();
    claim->results.push_back(*std::move(r));
  }
  for (size_t i = 0; i < config.size(); ++i) {
    absl::StatusOr<ClaimConfig> c = ParseConfig(config[i], i);
    if (!c.ok()) return c.status();
    claim->config.push_back(*std::move(c));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ResourceClaim> ParseClaim(std::string_view body) {
  if (body.size() > kMaxClaimBytes) return Bad("body", "is too large");
  const json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return Bad("body", "is not a JSON object");
  const auto meta = doc.find("metadata");
  if (meta == doc.end() || !meta->is_object()) return Bad("metadata", "is missing");
  ResourceClaim claim;
  for (auto [key, field] : {std::pair{"namespace", &claim.namespace_},
                            std::pair{"name", &claim.name}, std::pair{"uid", &claim.uid}}) {
    absl::StatusOr<std::string> v = String(*meta, key, "metadata");
    if (!v.ok()) return v.status();
    *field = *std::move(v);
  }
  const auto status = doc.find("status");
  if (status == doc.end()) return claim;
  if (!status->is_object()) return Bad("status", "is not an object");
  const auto allocation = status->find("allocation");
  if (allocation == status->end()) return claim;
  claim.allocated = true;
  if (absl::Status s = ParseAllocation(*allocation, &claim); !s.ok()) return s;
  return claim;
}

HttpClaimSource::HttpClaimSource(std::string address, std::chrono::milliseconds timeout)
    : address_(std::move(address)), timeout_(timeout) {}

absl::StatusOr<ResourceClaim> HttpClaimSource::Get(std::string_view namespace_,
                                                   std::string_view name) {
  // Both go into a request path: they must be what the API allows (a namespace is a DNS label,
  // a claim name a DNS subdomain), so nothing else reaches the other side.
  if (absl::Status s = ValidateDnsLabel("namespace", namespace_); !s.ok()) return s;
  if (absl::Status s = ValidateDnsSubdomain("claim name", name); !s.ok()) return s;
  LocalRequestOptions options;
  options.timeout = timeout_;
  options.max_response_bytes = kMaxClaimBytes + 4096;
  absl::StatusOr<LocalResponse> r =
      LocalGet(address_, fmt::format("/claims/{}/{}", namespace_, name), options);
  if (!r.ok()) {
    return absl::UnavailableError(
        fmt::format("neuron-dra-api at {}: {}", address_, std::string{r.status().message()}));
  }
  if (r->status == 404) {
    return absl::NotFoundError(fmt::format("claim {}/{} not found", namespace_, name));
  }
  if (r->status != 200) {
    std::string reason = r->body.substr(0, r->body.find('\n'));
    if (reason.size() > 200) reason.resize(200);
    return absl::UnavailableError(fmt::format("neuron-dra-api answered {} for {}/{}: {}", r->status,
                                              namespace_, name, reason));
  }
  return ParseClaim(r->body);
}

}  // namespace neuron::plugin::dra
