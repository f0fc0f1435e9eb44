#pragma once
// The API server's PATCH of a stored object (API concepts, "Patch operations"), for what
// neuron-dra-api patches: a Node's status.conditions.
//   - application/merge-patch+json (RFC 7386): maps merged key by key, a null value deleting the
//     key, any other value (a list too) replacing what was there;
//   - application/strategic-merge-patch+json: the same, except that a list with a patch merge
//     key in the API's types is merged item by item on that key, an item of the patch replacing
//     the fields it names of the stored item with the same key (added when there is none). The
//     stand-in knows the merge keys of the lists it is patched in: `conditions` (merge key
//     `type`: NodeStatus.conditions and every other status's conditions) and `addresses`
//     (`type`). `$patch`, `$retainKeys` and the other directives are refused (400), never
//     applied wrongly.
// application/json-patch+json and apply patches are refused with 415, as a server that does not
// support them answers.
//
// Pure functions; thread-safe.

#include <optional>
#include <string>
#include <string_view>

#include "driver-sim/controlplane/store.h"
#include "nlohmann/json.hpp"

namespace neuron::sim::apiserver {

// `current` with `patch` applied as `content_type` says; on error the API's answer (400 for a
// patch that is not an object or holds a directive, 415 for another Content-Type).
struct Patched {
  nlohmann::json object;
  std::optional<ApiAnswer> error;
};
Patched ApplyPatch(std::string_view content_type, const nlohmann::json& current,
                   const nlohmann::json& patch);

}  // namespace neuron::sim::apiserver
