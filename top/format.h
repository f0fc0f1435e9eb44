#pragma once
// Text formats of neuron-ls and neuron-top (docs/tools-ux.md#ls-table-rules, #top-layout), one
// place each. Pure functions; thread-safe.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/sample/runtime_records.h"

namespace neuron::top {

// neuron-top sizes: one decimal, base 1024, units B/KB/MB/GB, no space ("0.0B", "256.0KB",
// "441.8MB", "1.7GB"); "N/A" when absent.
std::string FormatSize(std::optional<uint64_t> bytes);
// neuron-ls NEURON MEMORY: whole GiB as "<n> GB" ("96 GB" for 103079215104 bytes).
std::string FormatGiB(uint64_t bytes);
// A fraction (0..1) as "56.81%"; "N/A" when absent.
std::string FormatPercent(std::optional<double> fraction);
// FLOP/s as TFLOPs with two decimals ("12.34TF"); "N/A" when absent.
std::string FormatTflops(std::optional<double> flops_per_s);
// Ascending integers as ranges: {0,1,2,3} -> "0-3", {0,2,3} -> "0,2-3".
std::string FormatRanges(const std::vector<int>& ids);
// "12, 3, 4, 1".
std::string JoinIds(const std::vector<int>& ids, std::string_view sep = ", ");
// The first max-3 characters plus "..." when longer than `max` (neuron-ls COMMAND,
// docs/tools-ux.md#ls-table-rules).
std::string TruncateEllipsis(std::string_view text, size_t max);
// "0000:cc:00.0" -> "cc:00.0" (the short BDF of --wide, -a, --topology and JSON).
std::string ShortBdf(std::string_view bdf);
// A runtime version as neuron-ls prints it ("2.0.0"), from the runtime's process record read
// through libnrt; "NA" when that is unknown (`records` null) or says none.
std::string RuntimeVersion(const RuntimeRecords* records);

// Display width of UTF-8 text in terminal columns (every code point counts one: we print no
// double-width characters).
size_t DisplayWidth(std::string_view utf8);

}  // namespace neuron::top
