// Fuzz target: every parser of a sysfs, procfs or sim file value
// (docs/driver-interface.md#sysfs-tree to #counter-semantics). Two modes, by the first byte:
//   - below 128, raw: the rest is the file's bytes, for the parser that byte % 12 picks. Beyond
//     "no crash", a value that parses is printed back by a tiny formatter written here (not the
//     library's, nor std::to_string) and must parse to the same value;
//   - 128 and above, generated: the rest of the bytes choose a well-formed text in one of the
//     formats the files use (docs/driver-interface.md#device-files, #computed-formats,
//     #connected-devices, #total-present-peak and #efa: numbers, lists, the power line, port
//     states and rates, with or without the trailing newline), and the parser must return exactly
//     the value the bytes chose; then one corruption of that text (a space, a sign, a carriage
//     return, a second newline, a letter, a missing part, an overflow) must be refused: nullopt or
//     an error naming the file, never a 0.
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/base/file_io.h"
#include "core/proc/pod_identity.h"
#include "core/proc/procinfo.h"
#include "core/sample/internal/counter_files.h"
#include "driver-sim/driver/node_info.h"
#include "tests/fuzz/fuzz_check.h"

namespace cf = neuron::counter_files;

namespace {

const std::filesystem::path kPath = "fuzz";

// --- The independent formatter: decimal and hexadecimal digits, by hand.
std::string Dec(uint64_t v) {
  std::string s;
  do {
    s.insert(s.begin(), static_cast<char>('0' + v % 10));
    v /= 10;
  } while (v != 0);
  return s;
}
std::string Dec(int64_t v) {
  // Negate in unsigned arithmetic: INT64_MIN has no positive counterpart.
  return v < 0 ? "-" + Dec(uint64_t{0} - static_cast<uint64_t>(v)) : Dec(static_cast<uint64_t>(v));
}
std::string Hex(uint64_t v) {
  std::string s;
  do {
    s.insert(s.begin(), "0123456789abcdef"[v % 16]);
    v /= 16;
  } while (v != 0);
  return "0x" + s;
}
// "%u.%02u" of basis points.
std::string Percent(uint32_t bp) {
  const std::string frac = Dec(uint64_t{bp % 100});
  return Dec(uint64_t{bp / 100}) + "." + (frac.size() == 1 ? "0" : "") + frac;
}
std::string CpuList(const std::vector<int>& cpus) {  // ascending, as ranges
  std::string s;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    s += (s.empty() ? "" : ",") + Dec(static_cast<uint64_t>(cpus[i]));
    if (j > i) s += "-" + Dec(static_cast<uint64_t>(cpus[j]));
    i = j + 1;
  }
  return s + "\n";
}
std::string IdList(const std::vector<int>& ids) {
  std::string s;
  for (int id : ids) s += (s.empty() ? "" : ", ") + Dec(static_cast<uint64_t>(id));
  return s + "\n";
}

// The basis points a "%u.%02u" field spells, computed apart from the parser in 64 bits: the
// digits with the dot dropped. nullopt for anything but digits around one dot, or too many digits.
std::optional<uint64_t> TextBp(std::string_view field) {
  uint64_t v = 0;
  int digits = 0;
  for (char c : field) {
    if (c == '.') continue;
    if (c < '0' || c > '9' || ++digits > 18) return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

// An accepted power line's percentages are the ones its text spells (no wrap past u32).
void CheckPowerFields(std::string_view text, const cf::ParsedPower& p) {
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  const uint32_t parsed[3] = {p.min_bp, p.max_bp, p.avg_bp};
  for (int i = 2; i >= 0; --i) {
    const size_t comma = text.rfind(',');
    FUZZ_CHECK(comma != std::string_view::npos);
    if (const auto bp = TextBp(text.substr(comma + 1))) FUZZ_CHECK(*bp == parsed[i]);
    text = text.substr(0, comma);
  }
}

// Raw mode: round trips through the formatter above.
void Raw(int which, std::string_view text) {
  switch (which) {
    case 0:
      if (auto v = cf::ParseCounter(text)) FUZZ_CHECK(cf::ParseCounter(Dec(*v) + "\n") == v);
      break;
    case 1:
      if (auto s = cf::ParseState(text)) {
        const int v = static_cast<int>(*s);
        FUZZ_CHECK(v >= 0 && v <= 2 && cf::ParseState(Dec(static_cast<uint64_t>(v)) + "\n") == s);
      }
      break;
    case 2:
      if (auto p = cf::ParsePower(text)) {
        FUZZ_CHECK(!p->status.empty());
        CheckPowerFields(text, *p);
        const std::string again = std::string(p->status) + "," + Dec(p->epoch) + "," +
                                  Percent(p->min_bp) + "," + Percent(p->max_bp) + "," +
                                  Percent(p->avg_bp) + "\n";
        const auto q = cf::ParsePower(again);
        FUZZ_CHECK(q && q->status == p->status && q->epoch == p->epoch && q->min_bp == p->min_bp &&
                   q->max_bp == p->max_bp && q->avg_bp == p->avg_bp);
      }
      break;
    case 3:
      if (auto s = cf::ParseNumberedState(text)) {
        FUZZ_CHECK(text.find(s->second) != text.npos);
        const std::string again =
            Dec(static_cast<uint64_t>(s->first)) + ": " + std::string(s->second) + "\n";
        const auto t = cf::ParseNumberedState(again);
        FUZZ_CHECK(t && t->first == s->first && t->second == s->second);
      }
      break;
    case 4:
      if (auto r = cf::ParseRateGbps(text)) FUZZ_CHECK(*r >= 0);
      break;
    case 5:
      if (auto v = neuron::ParseU64(text, kPath); v.ok()) {
        FUZZ_CHECK(*neuron::ParseU64(Dec(*v) + "\n", kPath) == *v);
      }
      break;
    case 6:
      if (auto v = neuron::ParseI64(text, kPath); v.ok()) {
        FUZZ_CHECK(*neuron::ParseI64(Dec(*v) + "\n", kPath) == *v);
      }
      break;
    case 7:
      if (auto v = neuron::ParseHex(text, kPath); v.ok()) {
        FUZZ_CHECK(*neuron::ParseHex(Hex(*v) + "\n", kPath) == *v);
      }
      break;
    case 8:
      if (auto cpus = neuron::ParseCpuList(text, kPath); cpus.ok()) {
        for (size_t i = 1; i < cpus->size(); ++i) FUZZ_CHECK((*cpus)[i - 1] < (*cpus)[i]);
        FUZZ_CHECK(*neuron::ParseCpuList(CpuList(*cpus), kPath) == *cpus);
      }
      break;
    case 9:
      if (auto ids = neuron::ParseIdList(text, kPath); ids.ok()) {
        FUZZ_CHECK(*neuron::ParseIdList(IdList(*ids), kPath) == *ids);
      }
      break;
    case 10:
      if (auto info = neuron::ParseNodeInfo(text, "node.json"); info.ok()) {
        const std::string again = neuron::NodeInfoToJson(*info);
        FUZZ_CHECK(neuron::ParseNodeInfo(again, "again").ok());
      }
      break;
    default:
      (void)neuron::ParsePodFromCgroup(text);
      (void)neuron::ParseProcessStat(text, "stat");
      (void)neuron::ParseSystemCpuTimes(text, "stat");
  }
}

// --- Generated mode.

// Draws numbers from the fuzz bytes; zeros once they run out.
class Draw {
 public:
  Draw(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint64_t Bytes(int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v = v << 8 | (at_ < size_ ? data_[at_++] : 0);
    return v;
  }
  uint32_t Below(uint32_t n) { return static_cast<uint32_t>(Bytes(4) % n); }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

template <typename T>
void Refused(const std::optional<T>& v) {
  FUZZ_CHECK(!v.has_value());
}
template <typename T>
void Refused(const absl::StatusOr<T>& v) {
  FUZZ_CHECK(!v.ok() && v.status().code() == absl::StatusCode::kDataLoss);
  FUZZ_CHECK(v.status().message().find("fuzz") != std::string_view::npos);
}

// Corruptions that break any file holding one number or a list of numbers: `body` is the text
// without its newline.
std::vector<std::string> Broken(const std::string& body, const std::string& nl,
                                std::vector<std::string> specific) {
  for (const std::string& b :
       {absl::StrCat(" ", body, nl), absl::StrCat(body, " ", nl), absl::StrCat(body, "\r\n"),
        absl::StrCat(body, "\n\n"), absl::StrCat(body, "z", nl), absl::StrCat("z", body, nl)}) {
    specific.push_back(b);
  }
  return specific;
}

void GeneratedNumber(int format, Draw& d, const std::string& nl) {
  switch (format) {
    case 0: {  // "%llu\n": counters, ParseCounter and ParseU64 alike
      const uint64_t v = d.Bytes(static_cast<int>(1 + d.Below(8)));
      FUZZ_CHECK(cf::ParseCounter(Dec(v) + nl) == v);
      FUZZ_CHECK(*neuron::ParseU64(Dec(v) + nl, kPath) == v);
      for (const std::string& t : Broken(
               Dec(v), nl, {"", "\n", "+" + Dec(v), "-" + Dec(v), "18446744073709551616" + nl})) {
        Refused(cf::ParseCounter(t));
        Refused(neuron::ParseU64(t, kPath));
      }
      break;
    }
    case 1: {  // reset: "%d\n", 0 RESET, 1 READY, 2 INVALID
      const uint32_t v = d.Below(3);
      FUZZ_CHECK(cf::ParseState(Dec(uint64_t{v}) + nl) == static_cast<neuron::DeviceState>(v));
      for (const std::string& t :
           Broken(Dec(uint64_t{v}), nl, {"3" + nl, "-1" + nl, "+1" + nl, "1.0" + nl, ""})) {
        Refused(cf::ParseState(t));
      }
      break;
    }
    case 2: {  // "%d\n" with a sign (numa_node prints -1)
      const int64_t v = static_cast<int64_t>(d.Bytes(static_cast<int>(1 + d.Below(8))));
      FUZZ_CHECK(*neuron::ParseI64(Dec(v) + nl, kPath) == v);
      for (const std::string& t : Broken(Dec(v), nl,
                                         {"+" + Dec(v), "--1", "-", "", "9223372036854775808" + nl,
                                          "-9223372036854775809" + nl})) {
        Refused(neuron::ParseI64(t, kPath));
      }
      break;
    }
    default: {  // PCI ids: "0x1d0f\n"
      const uint32_t v = static_cast<uint32_t>(d.Bytes(4));
      FUZZ_CHECK(*neuron::ParseHex(Hex(v) + nl, kPath) == v);
      for (const std::string& t :
           Broken(Hex(v), nl,
                  {Hex(v).substr(2) + nl, "0x" + nl, "0x-1", "0X1d0f", "0x100000000" + nl})) {
        Refused(neuron::ParseHex(t, kPath));
      }
    }
  }
}

void GeneratedPower(Draw& d, const std::string& nl) {
  static const char* const kStatus[] = {"POWER_STATUS_VALID", "POWER_STATUS_NO_DATA",
                                        "POWER_STATUS_INVALID"};
  const std::string status = kStatus[d.Below(3)];
  const int64_t epoch = static_cast<int64_t>(d.Bytes(4));
  const uint32_t bp[3] = {d.Below(10001), d.Below(10001), d.Below(10001)};
  const std::string head = status + "," + Dec(epoch) + ",";
  const std::string text = head + Percent(bp[0]) + "," + Percent(bp[1]) + "," + Percent(bp[2]) + nl;
  const auto p = cf::ParsePower(text);
  FUZZ_CHECK(p && p->status == status && p->epoch == epoch && p->min_bp == bp[0] &&
             p->max_bp == bp[1] && p->avg_bp == bp[2]);
  for (const std::string& t :
       {absl::StrCat(head, "1.5,2.00,3.00", nl), absl::StrCat(head, "1.00,2.00", nl),
        absl::StrCat(head, "1.00,2.00,3.00,4.00", nl),
        absl::StrCat(status, ",-1,1.00,2.00,3.00", nl),
        absl::StrCat(",", Dec(epoch), ",1.00,2.00,3.00", nl), absl::StrCat(head, "1,2.00,3.00", nl),
        absl::StrCat(head, "1.00,2.00,.00", nl), std::string()}) {
    Refused(cf::ParsePower(t));
  }
}

void GeneratedPortState(Draw& d, const std::string& nl) {
  static const char* const kNames[] = {"DOWN", "INIT", "ARMED", "ACTIVE", "LinkUp", "Disabled"};
  const int n = static_cast<int>(d.Below(8));
  const std::string name = kNames[d.Below(6)];
  // The parsed name views the text, so the text must outlive it.
  const std::string text = Dec(static_cast<uint64_t>(n)) + ": " + name + nl;
  const auto s = cf::ParseNumberedState(text);
  FUZZ_CHECK(s && s->first == n && s->second == name);
  for (const std::string& t :
       {absl::StrCat(Dec(static_cast<uint64_t>(n)), ":", name, nl), absl::StrCat("-1: ", name, nl),
        absl::StrCat(Dec(static_cast<uint64_t>(n)), ": ", nl), absl::StrCat("x: ", name, nl),
        name + nl}) {
    Refused(cf::ParseNumberedState(t));
  }
  const uint32_t rate = d.Below(1000);
  const std::string suffix = d.Below(2) == 0 ? " Gb/sec" : " Gb/sec (4X EDR)";
  FUZZ_CHECK(cf::ParseRateGbps(Dec(uint64_t{rate}) + suffix + nl) == static_cast<double>(rate));
  for (const std::string& t :
       {absl::StrCat(Dec(uint64_t{rate}), "Gb/sec", nl), absl::StrCat("-1", suffix, nl),
        absl::StrCat("x", suffix, nl), absl::StrCat(Dec(uint64_t{rate}), " Mb/sec", nl), suffix}) {
    Refused(cf::ParseRateGbps(t));
  }
}

// cpulist (ascending disjoint ranges, "0-31,64-95\n") and connected_devices ("12, 3, 4, 1\n").
void GeneratedLists(Draw& d, const std::string& nl) {
  std::vector<int> cpus;
  std::string body;
  for (uint32_t r = d.Below(5), next = d.Below(64); r > 0; --r) {
    const uint32_t lo = next, hi = lo + d.Below(3) * d.Below(40);
    body +=
        (body.empty() ? "" : ",") + Dec(uint64_t{lo}) + (hi > lo ? "-" + Dec(uint64_t{hi}) : "");
    for (uint32_t c = lo; c <= hi; ++c) cpus.push_back(static_cast<int>(c));
    next = hi + 2 + d.Below(100);
  }
  FUZZ_CHECK(*neuron::ParseCpuList(body + nl, kPath) == cpus);
  for (const std::string& t :
       Broken(body, nl,
              {"5-3" + nl, absl::StrCat(body, ",", nl), "65536" + nl, "0--3" + nl, "-1" + nl})) {
    Refused(neuron::ParseCpuList(t, kPath));
  }
  std::vector<int> ids;
  for (uint32_t k = d.Below(5); k > 0; --k) ids.push_back(static_cast<int>(d.Below(1024)));
  std::string joined = IdList(ids);
  joined.pop_back();  // its newline
  FUZZ_CHECK(*neuron::ParseIdList(joined + nl, kPath) == ids);
  for (const std::string& t :
       Broken(joined, nl,
              {"1,2" + nl, "1024" + nl, "-1" + nl, absl::StrCat(joined, ", ", nl), "1,  2" + nl})) {
    Refused(neuron::ParseIdList(t, kPath));
  }
}

void Generated(const uint8_t* data, size_t size) {
  Draw d(data, size);
  const uint32_t format = d.Below(7);
  const std::string nl = d.Below(2) == 0 ? "\n" : "";  // core_count has no newline
  if (format < 4) {
    GeneratedNumber(static_cast<int>(format), d, nl);
  } else if (format == 4) {
    GeneratedPower(d, nl);
  } else if (format == 5) {
    GeneratedPortState(d, nl);
  } else {
    GeneratedLists(d, nl);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] < 128) {
    Raw(data[0] % 12, std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  } else {
    Generated(data + 1, size - 1);
  }
  return 0;
}
