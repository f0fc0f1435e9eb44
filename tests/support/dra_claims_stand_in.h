#pragma once
// neuron-dra-api's claim endpoint as the privileged plugin reads it
// (docs/kubelet-api.md#dra-claims), for tests that run the real plugin in DRA mode without an API
// server: the pruned claim `default/<name>` (uid "uid-<name>") allocated `devices` of request
// "neurons" in `pool`, and a Unix-socket server answering GET /claims/default/<name> with it.

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "http/http_server.h"
#include "nlohmann/json.hpp"

namespace neuron::testing {

// The claim's answer, with one opaque config for our driver when `parameters` is given.
inline std::string DraClaimAnswer(const std::string& name, const std::string& pool,
                                  const std::vector<std::string>& devices,
                                  std::optional<nlohmann::json> parameters = std::nullopt) {
  using nlohmann::json;
  json results = json::array();
  for (const std::string& d : devices) {
    // EFAs are devices of their own driver's pool, as the scheduler allocates them.
    const char* driver = d.starts_with("efa-") ? "efa.neuron.aws.com" : "neuron.aws.com";
    results.push_back({{"request", "neurons"}, {"driver", driver}, {"pool", pool}, {"device", d}});
  }
  json alloc = {{"devices", {{"results", results}}}};
  if (parameters) {
    alloc["devices"]["config"] =
        json::array({{{"source", "FromClaim"},
                      {"requests", {"neurons"}},
                      {"opaque", {{"driver", "neuron.aws.com"}, {"parameters", *parameters}}}}});
  }
  return json{{"metadata", {{"namespace", "default"}, {"name", name}, {"uid", "uid-" + name}}},
              {"status", {{"allocation", alloc}}}}
      .dump();
}

// Serves `answers` (claim name -> DraClaimAnswer) on `address` ("unix:PATH"); each answer counts
// one in `asked` when given (a test that a prepared claim is not asked for again).
inline absl::StatusOr<std::unique_ptr<HttpServer>> ServeDraClaims(
    const std::string& address, const std::map<std::string, std::string>& answers,
    std::atomic<int>* asked = nullptr) {
  HttpServer::Options o;
  o.listen_address = address;
  o.threads = 1;
  for (const auto& [name, body] : answers) {
    o.handlers["/claims/default/" + name] = [asked, text = body](const HttpRequest&) {
      if (asked != nullptr) ++*asked;
      HttpResponse r;
      r.content_type = "application/json";
      r.body = text;
      return r;
    };
  }
  return HttpServer::Start(o);
}

}  // namespace neuron::testing
