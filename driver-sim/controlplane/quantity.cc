#include "driver-sim/controlplane/quantity.h"

#include <algorithm>
#include <cctype>
#include <optional>

namespace neuron::sim::apiserver {

namespace {

using Nano = Quantity::Nano;

// The API's error for a string that is not a quantity (quantity.go, ErrFormatWrong).
constexpr char kFormatWrong[] =
    "quantities must match the regular expression "
    "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
constexpr Nano kLimit = static_cast<Nano>(1'000'000'000'000'000'000) * 1'000'000'000'000'000'000;
constexpr int kMaxDigits = 30;  // more significant digits than this cannot stay under kLimit

// The suffix as a power of 10 (decimal) or of 2 (binary); nullopt when it is not one.
struct Scale {
  int base = 10;
  int exponent = 0;
};

std::optional<Scale> SuffixScale(std::string_view s) {
  if (s.empty()) return Scale{};
  if (s.size() == 2 && s[1] == 'i') {
    constexpr std::string_view kBinary = "KMGTPE";
    const size_t i = kBinary.find(s[0]);
    if (i == std::string_view::npos) return std::nullopt;
    return Scale{2, 10 * static_cast<int>(i + 1)};
  }
  if (s.size() == 1) {
    switch (s[0]) {
      case 'n':
        return Scale{10, -9};
      case 'u':
        return Scale{10, -6};
      case 'm':
        return Scale{10, -3};
      case 'k':
        return Scale{10, 3};
      case 'M':
        return Scale{10, 6};
      case 'G':
        return Scale{10, 9};
      case 'T':
        return Scale{10, 12};
      case 'P':
        return Scale{10, 15};
      case 'E':
        return Scale{10, 18};
      default:
        return std::nullopt;
    }
  }
  if (s[0] != 'e' && s[0] != 'E') return std::nullopt;
  std::string_view exp = s.substr(1);
  bool minus = false;
  if (!exp.empty() && (exp[0] == '+' || exp[0] == '-')) {
    minus = exp[0] == '-';
    exp.remove_prefix(1);
  }
  if (exp.empty() || exp.size() > 3) return std::nullopt;
  int e = 0;
  for (char c : exp) {
    if (std::isdigit(static_cast<unsigned char>(c)) == 0) return std::nullopt;
    e = e * 10 + (c - '0');
  }
  return Scale{10, minus ? -e : e};
}

}  // namespace

absl::StatusOr<Quantity> Quantity::Parse(std::string_view text) {
  const absl::Status bad = absl::InvalidArgumentError(kFormatWrong);
  std::string_view s = text;
  bool minus = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    minus = s[0] == '-';
    s.remove_prefix(1);
  }
  // The number: digits with at most one point, at least one digit.
  Nano mantissa = 0;
  int digits = 0;
  int fraction = 0;  // digits after the point
  bool point = false;
  size_t i = 0;
  for (; i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) != 0 || s[i] == '.');
       ++i) {
    if (s[i] == '.') {
      if (point) return bad;
      point = true;
      continue;
    }
    if (mantissa == 0 && s[i] == '0') {
      fraction += point ? 1 : 0;
      digits += 1;
      continue;
    }
    if (++digits > kMaxDigits) return absl::InvalidArgumentError("the quantity is too large");
    mantissa = mantissa * 10 + (s[i] - '0');
    fraction += point ? 1 : 0;
  }
  if (digits == 0) return bad;
  const std::optional<Scale> scale = SuffixScale(s.substr(i));
  if (!scale) return bad;
  // value = mantissa * 10^-fraction * base^exponent, in nano-units (10^9 per unit).
  Nano value = mantissa;
  int ten = 9 - fraction;
  if (scale->base == 10) {
    ten += scale->exponent;
  } else {
    for (int k = 0; k < scale->exponent && value <= kLimit; ++k) value *= 2;
  }
  for (; ten > 0 && value <= kLimit; --ten) value *= 10;
  Nano rest = 0;  // what a negative power of ten cuts off: rounded up, as the API does
  for (; ten < 0; ++ten) {
    rest = rest != 0 || value % 10 != 0 ? 1 : 0;
    value /= 10;
  }
  value += rest;
  if (value > kLimit) return absl::InvalidArgumentError("the quantity is too large");
  return Quantity(minus ? -value : value);
}

absl::StatusOr<Quantity> Quantity::FromJson(const nlohmann::json& value) {
  if (value.is_string()) return Parse(value.get<std::string>());
  if (value.is_number()) return Parse(value.dump());
  return absl::InvalidArgumentError(kFormatWrong);
}

std::string Quantity::ToString() const {
  Nano v = nano_ < 0 ? -nano_ : nano_;
  std::string whole;
  Nano units = v / kNanoPerUnit;
  do {
    whole.push_back(static_cast<char>('0' + static_cast<int>(units % 10)));
    units /= 10;
  } while (units != 0);
  std::reverse(whole.begin(), whole.end());
  std::string frac;
  Nano part = v % kNanoPerUnit;
  for (Nano d = kNanoPerUnit / 10; part != 0 && d != 0; d /= 10) {
    frac.push_back(static_cast<char>('0' + static_cast<int>(part / d)));
    part %= d;
  }
  return (nano_ < 0 ? "-" : "") + whole + (frac.empty() ? "" : "." + frac);
}

}  // namespace neuron::sim::apiserver
