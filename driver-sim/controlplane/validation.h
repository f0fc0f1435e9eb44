#pragma once
// The API server's validation of the resource.k8s.io/v1 and coordination.k8s.io/v1 objects the
// stand-in stores, as the Kubernetes API reference states it (each rule cites the field's
// documented limit in validation.cc). Only what the DRA driver, the allocator and the tests use is
// checked; a field the stand-in does not know is kept and not checked, never invented.
//
// Pure functions; thread-safe.

#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"
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

// The feature gates of the stand-in (`neuron-sim apiserver --feature-gates`).
struct FeatureGates {
  // DRAPartitionableDevices (pkg/features: alpha, off by default, in 1.33-1.35; beta, on by
  // default, from 1.36).
  bool partitionable_devices = true;
  // Not a gate but the version: a device taint's effect None is valid from Kubernetes 1.35
  // (resource.k8s.io DeviceTaint: "Valid effects are None, NoSchedule and NoExecute"); before,
  // only the other two (`neuron-sim apiserver --kubernetes-version 1.34`).
  bool taint_effect_none = true;
};

// metadata.name (and namespace) and the kind's spec. `kind` is "ResourceSlice",
// "ResourceClaim", "DeviceClass" or "Lease" (spec.leaseDurationSeconds above 0 when given,
// spec.leaseTransitions not below 0).
std::vector<FieldError> Validate(std::string_view kind, const nlohmann::json& object,
                                 const FeatureGates& gates = {});

// The decoder's part: a resource.Quantity that does not parse (a counter's or a capacity's
// value) makes the whole body undecodable, and the API server answers 400 before validating.
// "" when every quantity of a ResourceSlice parses, else the API's message with the field.
std::string CheckQuantities(std::string_view kind, const nlohmann::json& object);

// Everything the decoder refuses (400) before validation: CheckQuantities, and for a Lease a
// spec field of the wrong JSON type (holderIdentity not a string, leaseDurationSeconds not an
// integer) or an acquireTime/renewTime that is not a MicroTime ("2026-12-06T23:50:01.123456Z":
// metav1.MicroTime decodes RFC3339Micro only). "" when it decodes.
std::string CheckDecoding(std::string_view kind, const nlohmann::json& object);

// What the ResourceSlice registry strategy does to a slice before validating it, on create and
// update (pkg/registry/resource/resourceslice/strategy.go, dropDisabledFields): with
// DRAPartitionableDevices off, spec.sharedCounters, spec.perDeviceNodeSelection and each
// device's consumesCounters, nodeName, nodeSelector and allNodes are cleared, silently, unless
// `old` (the stored slice an update replaces; null on create) already uses one of them.
void DropDisabledFields(const FeatureGates& gates, nlohmann::json& slice,
                        const nlohmann::json* old);

// The API's defaulting of a ResourceSlice as it is decoded, on create and on every update
// (pkg/apis/resource/v1/defaults.go, SetDefaults_DeviceTaint): a device taint without timeAdded
// gets `now`, truncated to the second ("2026-12-06T20:40:00Z"). A writer that leaves timeAdded
// out of an update thus moves it, and the slice changes.
void DefaultTaintTimes(nlohmann::json& slice, absl::Time now);

}  // namespace neuron::sim::apiserver
