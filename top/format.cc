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

namespace {

// The first `n` code points of UTF-8 text.
std::string_view FirstCodePoints(std::string_view text, size_t n) {
  size_t seen = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xc0) != 0x80 && seen++ == n) {
      return text.substr(0, i);
    }
  }
  return text;
}

}  // namespace

std::string TruncateEllipsis(std::string_view text, size_t max) {
  // Counted in code points and cut between them, so a cut never splits a character.
  if (DisplayWidth(text) <= max) return std::string(text);
  if (max <= 3) return std::string(FirstCodePoints(text, max));
  return std::string(FirstCodePoints(text, max - 3)) + "...";
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

std::u32string DecodeUtf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    // The sequence's length, and the least code point that needs it (below: an overlong form).
    int len = 0;
    char32_t least = 0;
    char32_t c = 0;
    if (b < 0x80) {
      len = 1;
      c = b;
    } else if ((b & 0xe0) == 0xc0) {
      len = 2;
      least = 0x80;
      c = b & 0x1f;
    } else if ((b & 0xf0) == 0xe0) {
      len = 3;
      least = 0x800;
      c = b & 0x0f;
    } else if ((b & 0xf8) == 0xf0) {
      len = 4;
      least = 0x10000;
      c = b & 0x07;
    }
    bool ok = len > 0 && i + static_cast<size_t>(len) <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      const auto cb = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      ok = (cb & 0xc0) == 0x80;
      c = (c << 6) | (cb & 0x3f);
    }
    ok = ok && c >= least && c <= 0x10ffff && (c < 0xd800 || c > 0xdfff);
    out.push_back(ok ? c : U'\uFFFD');
    i += ok ? static_cast<size_t>(len) : 1;
  }
  return out;
}

void AppendUtf8(char32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3f)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3f)));
  }
}

std::string TerminalSafe(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char32_t c : DecodeUtf8(text)) {
    if (c < 0x20 || (c >= 0x7f && c <= 0x9f)) {
      out += fmt::format("\\x{:02x}", static_cast<uint32_t>(c));
    } else if ((c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069)) {
      out += fmt::format("\\u{:04x}", static_cast<uint32_t>(c));
    } else {
      AppendUtf8(c, &out);
    }
  }
  return out;
}

}  // namespace neuron::top
