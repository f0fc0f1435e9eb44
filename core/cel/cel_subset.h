#pragma once
// The subset of CEL that the simulated scheduler (driver-sim/scheduler) evaluates in DRA device
// selectors, and neuron-dra-api in the cluster's DeviceClass (plugin/kubeapi/class_check.h): what
// DeviceClasses and the claim templates of AWS's and our documentation use
// (docs/OPERATIONS.md#dra), with CEL's semantics for it. Anything outside the subset is refused
// when the expression is compiled, with an error naming the construct and its column, never matched
// silently.
//
// The subset (the Kubernetes DRA CEL environment, resource.k8s.io/v1 CELDeviceSelector):
//   - literals: strings ("..." or '...', with \" \' \\ \n \t escapes), ints, true, false, and
//     lists of them ([a, b]);
//   - device.driver; device.attributes["domain"].name and device.attributes["domain"]["name"],
//     whose values are string, int, bool or version; has(device.attributes["domain"].name);
//   - semver("1.2.3") and, on versions, compareTo, isGreaterThan, isLessThan, major, minor,
//     patch; on strings, startsWith, endsWith, contains;
//   - == and != on equal types; < <= > >= on ints and strings; `in` a list; !, && and ||.
// Evaluation errors follow CEL: a missing attribute or a type mismatch is an error, except where
// && or || is decided by its other side (false && error is false, true || error is true).
// device.capacity, arithmetic, the ternary operator, macros other than has(), regular
// expressions and quantities are outside the subset.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "absl/status/statusor.h"

namespace neuron::cel {

// A semantic version: MAJOR.MINOR.PATCH[-PRERELEASE] (build metadata is ignored in comparisons).
struct Semver {
  int64_t major = 0;
  int64_t minor = 0;
  int64_t patch = 0;
  std::string prerelease;
  bool operator==(const Semver&) const = default;
};
// -1, 0 or 1, by semver.org's precedence rules.
int CompareSemver(const Semver& a, const Semver& b);
absl::StatusOr<Semver> ParseSemver(std::string_view text);

// One device attribute's value, as a ResourceSlice types it.
using AttributeValue = std::variant<bool, int64_t, std::string, Semver>;

// A device as a selector sees it.
struct DeviceView {
  std::string driver;
  // domain -> attribute name -> value. An unqualified attribute of a slice is in the domain of
  // the slice's driver.
  std::map<std::string, std::map<std::string, AttributeValue, std::less<>>, std::less<>> attributes;
};

class CelExpression {
 public:
  // InvalidArgument naming what is outside the subset or malformed, with its 1-based column.
  static absl::StatusOr<CelExpression> Compile(std::string_view text);

  // Whether the device matches: true or false, or FailedPrecondition when evaluation fails
  // (CEL's runtime errors: a missing attribute, a type mismatch, a result that is not a bool).
  absl::StatusOr<bool> Matches(const DeviceView& device) const;

  const std::string& text() const { return text_; }

  struct Node;

 private:
  CelExpression(std::string text, std::shared_ptr<const Node> root);
  std::string text_;
  std::shared_ptr<const Node> root_;
};

}  // namespace neuron::cel
