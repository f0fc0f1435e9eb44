#include "core/proc/meminfo.h"

#include <charconv>
#include <cstdint>

#include "core/base/file_io.h"

namespace neuron {
namespace {

// "  16318332 kB" -> bytes; nullopt unless digits (and an optional " kB") are all there is.
std::optional<uint64_t> ParseKb(std::string_view value) {
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  uint64_t kb = 0;
  const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), kb);
  if (ec != std::errc() || ptr == value.data()) return std::nullopt;
  const std::string_view unit(ptr, value.data() + value.size() - ptr);
  if (unit != " kB" && !unit.empty()) return std::nullopt;
  if (kb > UINT64_MAX / 1024) return std::nullopt;
  return kb * 1024;
}

std::optional<uint64_t> Difference(std::optional<uint64_t> total, std::optional<uint64_t> free) {
  if (!total || !free || *free > *total) return std::nullopt;
  return *total - *free;
}

}  // namespace

std::optional<uint64_t> MemInfo::MemUsed() const { return Difference(mem_total, mem_available); }
std::optional<uint64_t> MemInfo::SwapUsed() const { return Difference(swap_total, swap_free); }

MemInfo ParseMeminfo(std::string_view text) {
  MemInfo out;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, colon);
    std::optional<uint64_t>* field = key == "MemTotal"       ? &out.mem_total
                                     : key == "MemAvailable" ? &out.mem_available
                                     : key == "SwapTotal"    ? &out.swap_total
                                     : key == "SwapFree"     ? &out.swap_free
                                                             : nullptr;
    if (field != nullptr) *field = ParseKb(line.substr(colon + 1));
  }
  return out;
}

absl::StatusOr<MemInfo> ReadMeminfo(const ProcReader& proc) {
  absl::StatusOr<std::string> text = ReadAttribute(proc.proc_dir() / "meminfo");
  if (!text.ok()) return text.status();
  return ParseMeminfo(*text);
}

}  // namespace neuron
