#pragma once
// resource.Quantity, the API's number type (k8s.io/apimachinery pkg/api/resource/quantity.go:
// the grammar in the Quantity type's comment), as far as the stand-in and the simulated scheduler
// need it: ResourceSlice counters ("2", "16", "500m", "1Gi") are parsed on validation and added,
// subtracted and compared when the scheduler accounts for shared counters.
//
//   <quantity>       ::= <signedNumber><suffix>
//   <signedNumber>   ::= [+-]? (<digits> | <digits>.<digits> | <digits>. | .<digits>)
//   <suffix>         ::= <binarySI> | <decimalSI> | <decimalExponent>
//   <binarySI>       ::= Ki | Mi | Gi | Ti | Pi | Ei
//   <decimalSI>      ::= n | u | m | "" | k | M | G | T | P | E
//   <decimalExponent>::= (e | E) <signedNumber without a point>
//
// The value is held exactly in nano-units (1e-9), the finest scale the API keeps; a finer value
// is rounded up, as the API rounds it. Values beyond 10^27 are refused here (the API accepts
// them): no counter of this project comes near.
//
// Thread-safe: a value type.

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace neuron::sim::apiserver {

class Quantity {
 public:
  __extension__ using Nano = __int128;

  Quantity() = default;
  static Quantity FromInt(int64_t whole) { return Quantity(Nano{whole} * kNanoPerUnit); }
  // InvalidArgument with the API's message when `text` is not a quantity.
  static absl::StatusOr<Quantity> Parse(std::string_view text);
  // A quantity as JSON carries it: a string, or a number (the API's decoder takes both).
  static absl::StatusOr<Quantity> FromJson(const nlohmann::json& value);

  Quantity& operator+=(const Quantity& o) {
    nano_ += o.nano_;
    return *this;
  }
  Quantity& operator-=(const Quantity& o) {
    nano_ -= o.nano_;
    return *this;
  }
  bool operator==(const Quantity& o) const { return nano_ == o.nano_; }
  bool operator<(const Quantity& o) const { return nano_ < o.nano_; }
  bool negative() const { return nano_ < 0; }

  // Canonical decimal text: "2", "-1", "0.5" (no suffix).
  std::string ToString() const;

 private:
  static constexpr Nano kNanoPerUnit = 1'000'000'000;
  explicit Quantity(Nano nano) : nano_(nano) {}
  Nano nano_ = 0;
};

}  // namespace neuron::sim::apiserver
