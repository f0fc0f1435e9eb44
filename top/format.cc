#include "top/format.h"

#include <fmt/format.h>

#include <array>

namespace neuron::top {

std::string FormatSize(std::optional<uint64_t> bytes) {
  if (!bytes) return "N/A";
  static constexpr std::array<std::string_view, 4> kUnits{"B", "KB", "MB", "GB"};
  double v = static_cast<double>(*bytes);
  size_t unit = 0;
  // Switch units at 1024 so that 1767.2MB prints as 1.7GB (docs/tools-ux.md#top-layout).
  while (v >= 1024.0 && unit + 1 < kUnits.size()) {
    v /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.1f}{}", v, kUnits[unit]);
}

std::string FormatGiB(uint64_t bytes) { return fmt::format("{} GB", bytes >> 30); }

std::string FormatPercent(std::optional<double> fraction) {
  if (!fraction) return "N/A";
  return fmt::format("{:.2f}%", *fraction * 100.0);
}

std::string FormatTflops(std::optional<double> flops_per_s) {
  if (!flops_per_s) return "N/A";
  return fmt::format("{:.2f}TF", *flops_per_s / 1e12);
}

std::string FormatRanges(const std::vector<int>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", ids[i]) : fmt::format("{}-{}", ids[i], ids[j]);
    i = j + 1;
  }
  return out;
}

std::string JoinIds(const std::vector<int>& ids, std::string_view sep) {
  return fmt::format("{}", fmt::join(ids, sep));
}

std::string TruncateEllipsis(std::string_view text, size_t max) {
  if (text.size() <= max) return std::string(text);
  if (max <= 3) return std::string(text.substr(0, max));
  return std::string(text.substr(0, max - 3)) + "...";
}

std::string ShortBdf(std::string_view bdf) {
  // "dddd:bb:ss.f": drop the domain when it is there.
  if (bdf.size() == 12 && bdf[4] == ':') return std::string(bdf.substr(5));
  return std::string(bdf);
}

std::string RuntimeVersion(const RuntimeRecords* records) {
  // Only the runtime's process record, read through libnrt, says it: the RUNTIME_VERSION
  // counter's packing is unverified (docs/tools-ux.md#ls-sources), so nothing else is read as a
  // version.
  if (records == nullptr || records->process.runtime_version == NdsVersion{}) return "NA";
  const NdsVersion& v = records->process.runtime_version;
  return fmt::format("{}.{}.{}", v.major, v.minor, v.build);
}

size_t DisplayWidth(std::string_view utf8) {
  size_t n = 0;
  for (const char c : utf8) {
    if ((static_cast<unsigned char>(c) & 0xc0) != 0x80) ++n;
  }
  return n;
}

}  // namespace neuron::top
