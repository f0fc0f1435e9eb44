#pragma once
// NEURON_RT_VISIBLE_CORES syntax (docs/runtime.md#environment): comma-separated items, each `N` or
// `N-M` (inclusive), e.g. "3,4,5,6", "3-6", "3-5,6". The runtime needs the result to be one
// contiguous, increasing run ("3,5,6" is invalid). The runtime (libnrt-sim) parses it and the
// device plugin formats it, so both share this one codec. Thread-safe (no state).

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace neuron {

// A contiguous run of global logical core indices: first .. first + count - 1.
struct CoreRange {
  int first = 0;
  int count = 0;
  int last() const { return first + count - 1; }
  bool operator==(const CoreRange&) const = default;
};

// The cores the text lists, in the order given. InvalidArgument, quoting the text, for an empty
// text or item, a non-number, a negative or huge index, a decreasing range ("6-3") or a core
// listed twice. Spaces around items are allowed.
absl::StatusOr<std::vector<int>> ParseCoreList(std::string_view text);

// ParseCoreList, then the runtime's rule: one contiguous, increasing run. The error names the
// first break ("3 is followed by 5").
absl::StatusOr<CoreRange> ParseVisibleCores(std::string_view text);

// InvalidArgument when the range is empty or leaves 0 .. total_cores - 1, naming the bad core
// and the valid range.
absl::Status CheckCoreRange(const CoreRange& range, int total_cores);

// "3-6" for a run of several cores, "3" for one (the form ParseVisibleCores reads back).
std::string FormatVisibleCores(const CoreRange& range);

// Any set of cores in the given order, runs of consecutive increasing indices compressed:
// {0,1,2,3,8} -> "0-3,8". Empty input gives "".
std::string FormatCoreList(std::span<const int> cores);

}  // namespace neuron
