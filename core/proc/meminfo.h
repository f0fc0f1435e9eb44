#pragma once
// The system's memory from /proc/meminfo (proc(5)), in bytes: what the exporter's JSON stream
// (`system_data.memory_info`) and its compat `system_memory_*` / `system_swap_*` series report.
// Read where ProcReader reads (docs/architecture.md#process-information). Thread-safe (no state).

#include <cstdint>
#include <optional>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/proc/procinfo.h"

namespace neuron {

struct MemInfo {
  // Absent when the line is missing or malformed (partial data is normal:
  // docs/style.md#partial-data).
  std::optional<uint64_t> mem_total;
  std::optional<uint64_t> mem_available;
  std::optional<uint64_t> swap_total;
  std::optional<uint64_t> swap_free;

  // total - available (swap: total - free); absent when either is, or when the free part is
  // larger than the total (a torn or malformed file: no figure rather than a wrong one).
  std::optional<uint64_t> MemUsed() const;
  std::optional<uint64_t> SwapUsed() const;
};

// "MemTotal:       16318332 kB\n...": the fields above, kB turned into bytes.
MemInfo ParseMeminfo(std::string_view text);

// ParseMeminfo of PROC/meminfo; an error names the file when it cannot be read.
absl::StatusOr<MemInfo> ReadMeminfo(const ProcReader& proc);

}  // namespace neuron
