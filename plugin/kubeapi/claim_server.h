#pragma once
// neuron-dra-api's answer to the privileged plugin: `GET /claims/<namespace>/<name>` on its Unix
// socket (docs/kubelet-api.md#resourceslices) reads the ResourceClaim from the API server and
// answers it pruned to what preparing a claim needs:
//   {"metadata":{"namespace","name","uid"},
//    "status":{"allocation":{"devices":{"results":[{"request","driver","pool","device"}...],
//                                       "config":[{"source","requests","opaque":{"driver",
//                                                  "parameters"}}...]}}}}
// with the API's field names, and no "allocation" key when the claim is not allocated.
// 404 when the API says NotFound (or the names are not valid Kubernetes names), 503 with a
// one-line reason when the API server cannot be reached or answers otherwise.
//
// The plugin parses only this small, fixed shape, written by this process
// (docs/OPERATIONS.md#privilege-model); this process parses the API server's answer.
//
// Thread-safe (the client is).

#include "http/http_server.h"
#include "nlohmann/json.hpp"
#include "plugin/kubeapi/client.h"

namespace neuron::kubeapi {

// The claim pruned as above. Fields the claim lacks are left out, never filled in.
nlohmann::json PruneClaim(const nlohmann::json& claim);

// The handler for the server's fallback route (paths other than the exact ones).
HttpResponse ServeClaim(const Client& client, const HttpRequest& request);

}  // namespace neuron::kubeapi
