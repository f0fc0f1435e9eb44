#include "core/model/visible_cores.h"

#include <fmt/format.h>

#include <charconv>
#include <set>

namespace neuron {
namespace {

// Indices above this are surely typos (64 devices x 8 cores is the driver's limit).
constexpr int kMaxCoreIndex = 65535;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

absl::Status Bad(std::string_view text, std::string_view why) {
  return absl::InvalidArgumentError(fmt::format("NEURON_RT_VISIBLE_CORES=\"{}\": {}", text, why));
}

absl::StatusOr<int> ParseIndex(std::string_view whole, std::string_view s) {
  s = Trim(s);
  if (s.empty()) return Bad(whole, "a range is missing a core index");
  int v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && v > kMaxCoreIndex)) {
    return Bad(whole, fmt::format("core index {} is too large", s));
  }
  if (ec != std::errc() || ptr != s.data() + s.size() || s.front() == '-' || s.front() == '+') {
    return Bad(whole, fmt::format("\"{}\" is not a core index (a non-negative integer)", s));
  }
  return v;
}

}  // namespace

absl::StatusOr<std::vector<int>> ParseCoreList(std::string_view text) {
  const std::string_view whole = text;
  if (Trim(text).empty()) return Bad(whole, "no cores listed");
  std::vector<int> out;
  std::set<int> seen;
  size_t pos = 0;
  while (true) {
    const size_t comma = text.find(',', pos);
    const std::string_view item = Trim(
        text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos));
    if (item.empty()) return Bad(whole, "empty item between commas");
    const size_t dash = item.find('-', 1);  // a leading '-' is a sign, rejected by ParseIndex
    int first = 0, last = 0;
    if (dash == std::string_view::npos) {
      absl::StatusOr<int> v = ParseIndex(whole, item);
      if (!v.ok()) return v.status();
      first = last = *v;
    } else {
      absl::StatusOr<int> a = ParseIndex(whole, item.substr(0, dash));
      if (!a.ok()) return a.status();
      absl::StatusOr<int> b = ParseIndex(whole, item.substr(dash + 1));
      if (!b.ok()) return b.status();
      if (*b < *a) {
        return Bad(whole, fmt::format("range {}-{} is decreasing (write {}-{})", *a, *b, *b, *a));
      }
      first = *a;
      last = *b;
    }
    for (int c = first; c <= last; ++c) {
      if (!seen.insert(c).second) return Bad(whole, fmt::format("core {} is listed twice", c));
      out.push_back(c);
    }
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return out;
}

absl::StatusOr<CoreRange> ParseVisibleCores(std::string_view text) {
  absl::StatusOr<std::vector<int>> cores = ParseCoreList(text);
  if (!cores.ok()) return cores.status();
  for (size_t i = 1; i < cores->size(); ++i) {
    if ((*cores)[i] != (*cores)[i - 1] + 1) {
      return Bad(text, fmt::format("cores must form one contiguous, increasing range ({} is "
                                   "followed by {})",
                                   (*cores)[i - 1], (*cores)[i]));
    }
  }
  return CoreRange{cores->front(), static_cast<int>(cores->size())};
}

absl::Status CheckCoreRange(const CoreRange& range, int total_cores) {
  if (range.count <= 0) return absl::InvalidArgumentError("no cores requested");
  if (range.first < 0 || range.last() >= total_cores) {
    const int bad = range.first < 0 ? range.first : range.last();
    return absl::InvalidArgumentError(
        fmt::format("NEURON_RT_VISIBLE_CORES={}: core {} does not exist; this instance has cores "
                    "0-{}",
                    FormatVisibleCores(range), bad, total_cores - 1));
  }
  return absl::OkStatus();
}

std::string FormatVisibleCores(const CoreRange& range) {
  if (range.count <= 1) return fmt::format("{}", range.first);
  return fmt::format("{}-{}", range.first, range.last());
}

std::string FormatCoreList(std::span<const int> cores) {
  std::string out;
  size_t i = 0;
  while (i < cores.size()) {
    size_t j = i;
    while (j + 1 < cores.size() && cores[j + 1] == cores[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", cores[i]) : fmt::format("{}-{}", cores[i], cores[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace neuron
