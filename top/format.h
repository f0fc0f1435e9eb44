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

// Text that a workload controls (command lines, pod, namespace and container names: whatever comes
// from /proc or the kubelet) made safe for the operator's terminal: every control character (C0,
// DEL, and C1, U+0080..U+009F, whose U+009B is a CSI) becomes a visible escape such as `\x1b`,
// bidirectional overrides and isolates (U+202A.. U+202E, U+2066..U+2069), which reorder what is
// shown, become `\u202e`, and invalid UTF-8 becomes U+FFFD. The rest is kept; the result is valid
// UTF-8 and TerminalSafe of it is itself. neuron-ls and neuron-top pass every such string through
// here before they print or paint it.
std::string TerminalSafe(std::string_view text);

// Decodes UTF-8 into code points; an invalid sequence (a stray or missing continuation byte, an
// overlong form, a surrogate, beyond U+10FFFF) becomes U+FFFD for its first byte.
std::u32string DecodeUtf8(std::string_view utf8);
// Encodes one code point.
void AppendUtf8(char32_t c, std::string* out);

}  // namespace neuron::top
