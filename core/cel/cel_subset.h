#pragma once
// The subset of CEL that the simulated scheduler (driver-sim/controlplane) evaluates in DRA device
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
//
// The same subset also evaluates expressions over named variables of structured data
// (CompileOver): a ValidatingAdmissionPolicy's `request` and `object`, which the API stand-in
// (driver-sim/controlplane) evaluates from the policy deploy/ ships. There, beside the above:
//   - a variable's fields by name (request.userInfo.username) or by index
//     (request.userInfo.extra['authentication.kubernetes.io/node-name']), a list's items by int
//     index ([0]; out of bounds is an error), has(x.field) on a map;
//   - `key in map`: whether the map has the key.

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

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

// Structured data as CEL sees JSON: null, bool, int, string, a list, or a map with string keys
// (an admission request, the object it writes). Doubles are outside the subset.
struct Data {
  enum class Type { kNull, kBool, kInt, kString, kList, kMap };
  Type type = Type::kNull;
  bool b = false;
  int64_t i = 0;
  std::string s = {};
  std::vector<Data> list = {};
  std::map<std::string, Data, std::less<>> map = {};
};

// The variables an expression of CompileOver reads, by name.
using Variables = std::map<std::string, Data, std::less<>>;

class CelExpression {
 public:
  // A device selector: `device` is its one variable. InvalidArgument naming what is outside the
  // subset or malformed, with its 1-based column.
  static absl::StatusOr<CelExpression> Compile(std::string_view text);
  // An expression over `variables` (any other name is refused, as Compile refuses it).
  static absl::StatusOr<CelExpression> CompileOver(std::string_view text,
                                                   const std::set<std::string>& variables);

  // Whether the device matches: true or false, or FailedPrecondition when evaluation fails
  // (CEL's runtime errors: a missing attribute, a type mismatch, a result that is not a bool).
  absl::StatusOr<bool> Matches(const DeviceView& device) const;
  // The same for an expression of CompileOver over `variables` (a variable it names that is
  // missing there is an error).
  absl::StatusOr<bool> Evaluate(const Variables& variables) const;

  const std::string& text() const { return text_; }

  struct Node;

 private:
  CelExpression(std::string text, std::shared_ptr<const Node> root);
  // Compile (`variables` null) or CompileOver.
  static absl::StatusOr<CelExpression> CompileIn(std::string_view text,
                                                 const std::set<std::string>* variables);
  std::string text_;
  std::shared_ptr<const Node> root_;
};

}  // namespace neuron::cel
