#pragma once
// The API server's validation of the resource.k8s.io/v1 objects the stand-in stores, as the
// Kubernetes API reference states it (each rule cites the field's documented limit in
// validation.cc). Only what the DRA driver, the allocator and the tests use is checked; a field
// the stand-in does not know is kept and not checked, never invented.
//
// Pure functions; thread-safe.

#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/text.h"
#include "nlohmann/json.hpp"

namespace neuron::sim::apiserver {

// One failed rule, as the API's Status details.causes lists it: the field path
// ("spec.devices[3].name"), the reason ("FieldValueInvalid", "FieldValueRequired",
// "FieldValueTooLong", "FieldValueTooMany", "FieldValueNotSupported", "FieldValueForbidden")
// and the message.
struct FieldError {
  std::string field;
  std::string reason;
  std::string message;
};

using neuron::Cat;  // core/base/text.h
using neuron::Split;

// RFC 1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 characters.
bool IsDnsLabel(std::string_view s);
// RFC 1123 subdomain: labels joined by '.', at most 253 characters.
bool IsDnsSubdomain(std::string_view s);
// Semantic Versioning 2.0.0 (semver.org): MAJOR.MINOR.PATCH[-pre][+build], no leading zeros.
bool IsSemver(std::string_view s);

// metadata.name (and namespace) and the kind's spec. `kind` is "ResourceSlice",
// "ResourceClaim" or "DeviceClass".
std::vector<FieldError> Validate(std::string_view kind, const nlohmann::json& object);

}  // namespace neuron::sim::apiserver
