#include "core/sample/internal/counter_files.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdio>
#include <cstring>

namespace neuron::counter_files {
namespace {

std::string_view StripNl(std::string_view t) {
  if (!t.empty() && t.back() == '\n') t.remove_suffix(1);
  return t;
}

template <typename T>
bool Whole(std::string_view t, T* out) {
  if (t.empty()) return false;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), *out);
  return ec == std::errc() && end == t.data() + t.size();
}

// "%u.%02u" -> basis points.
bool Percent(std::string_view t, uint32_t* bp) {
  const size_t dot = t.find('.');
  if (dot == std::string_view::npos || t.size() != dot + 3) return false;
  uint32_t whole = 0, frac = 0;
  if (!Whole(t.substr(0, dot), &whole) || !Whole(t.substr(dot + 1), &frac)) return false;
  // Basis points must fit in u32: check the sum in 64 bits, not the whole part alone (42949672.99
  // would wrap to 3).
  const uint64_t bp64 = static_cast<uint64_t>(whole) * 100 + frac;
  if (bp64 > UINT32_MAX) return false;
  *bp = static_cast<uint32_t>(bp64);
  return true;
}

}  // namespace

bool DirHandle::IsAbsence(int err) { return err == ENOENT || err == ENOTDIR; }

bool DirHandle::Reopen(uint64_t sweep) {
  fd_.Reset();
  reopened_sweep_ = sweep;
  fd_.Reset(::open(path_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  open_errno_ = fd_.valid() ? 0 : errno;
  return fd_.valid();
}

namespace {

ReadResult ReadOpened(UniqueFd fd, char* buf, size_t cap, size_t* len, int* err) {
  ssize_t n;
  do {
    n = ::read(fd.get(), buf, cap);
  } while (n < 0 && errno == EINTR);
  const int read_err = errno;
  fd.Reset();
  if (n == static_cast<ssize_t>(cap)) {
    // One read filled the buffer: the file is larger than any attribute we know.
    *err = EFBIG;
    return ReadResult::kError;
  }
  if (n < 0) {
    *err = read_err;
    return ReadResult::kError;
  }
  *len = static_cast<size_t>(n);
  return ReadResult::kOk;
}

ReadResult OpenFailed(int* err) {
  *err = errno;
  return (*err == ENOENT || *err == ENOTDIR) ? ReadResult::kMissing : ReadResult::kError;
}

constexpr int kFileFlags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;

}  // namespace

ReadResult DirHandle::ReadByPath(const char* name, char* buf, size_t cap, size_t* len, int* err) {
  char path[PATH_MAX];
  const int n = std::snprintf(path, sizeof(path), "%s/%s", path_.c_str(), name);
  if (n < 0 || static_cast<size_t>(n) >= sizeof(path)) {
    *err = ENAMETOOLONG;
    return ReadResult::kError;
  }
  UniqueFd fd(::open(path, kFileFlags));
  if (!fd.valid()) return OpenFailed(err);
  return ReadOpened(std::move(fd), buf, cap, len, err);
}

ReadResult DirHandle::Read(const char* name, char* buf, size_t cap, size_t* len, int* err,
                           uint64_t sweep) {
  if (!fd_.valid() && reopened_sweep_ != sweep) Reopen(sweep);
  if (!fd_.valid()) {
    if (IsAbsence(open_errno_)) {
      *err = open_errno_;
      return ReadResult::kMissing;
    }
    return ReadByPath(name, buf, cap, len, err);  // out of descriptors, or the like
  }
  UniqueFd fd(::openat(fd_.get(), name, kFileFlags));
  if (!fd.valid() && (errno == ENOENT || errno == ESTALE) && reopened_sweep_ != sweep) {
    // The directory may have been replaced since we opened it: look it up again, once.
    if (!Reopen(sweep)) {
      if (IsAbsence(open_errno_)) {
        *err = open_errno_;
        return ReadResult::kMissing;
      }
      return ReadByPath(name, buf, cap, len, err);
    }
    fd.Reset(::openat(fd_.get(), name, kFileFlags));
  }
  if (!fd.valid() && (errno == EMFILE || errno == ENFILE)) {
    // Out of descriptors: give ours back and go by full paths for the rest of this sweep, so
    // the directory handles cannot starve the file opens they exist for.
    open_errno_ = errno;
    fd_.Reset();
    reopened_sweep_ = sweep;
    return ReadByPath(name, buf, cap, len, err);
  }
  if (!fd.valid()) return OpenFailed(err);
  return ReadOpened(std::move(fd), buf, cap, len, err);
}

void ErrorSink::Add(const DirHandle& dir, const char* name, std::string_view what) {
  errors_.push_back(fmt::format("{}/{}: {}", dir.path(), name, what));
}

void ErrorSink::AddErrno(const DirHandle& dir, const char* name, int err) {
  if (err == EFBIG) {
    Add(dir, name, fmt::format("larger than {} bytes", kMaxFileBytes - 1));
  } else {
    Add(dir, name, std::strerror(err));
  }
}

std::optional<uint64_t> ParseCounter(std::string_view text) {
  uint64_t v = 0;
  if (!Whole(StripNl(text), &v)) return std::nullopt;
  return v;
}

std::optional<DeviceState> ParseState(std::string_view text) {
  int v = -1;
  if (!Whole(StripNl(text), &v) || v < 0 || v > 2) return std::nullopt;
  return static_cast<DeviceState>(v);
}

std::optional<ParsedPower> ParsePower(std::string_view text) {
  std::string_view t = StripNl(text);
  std::string_view parts[5];
  for (int i = 0; i < 5; ++i) {
    const size_t comma = t.find(',');
    if ((comma == std::string_view::npos) != (i == 4)) return std::nullopt;
    parts[i] = t.substr(0, comma);
    if (comma != std::string_view::npos) t.remove_prefix(comma + 1);
  }
  ParsedPower p;
  p.status = parts[0];
  if (p.status.empty() || !Whole(parts[1], &p.epoch) || p.epoch < 0 ||
      !Percent(parts[2], &p.min_bp) || !Percent(parts[3], &p.max_bp) ||
      !Percent(parts[4], &p.avg_bp)) {
    return std::nullopt;
  }
  return p;
}

namespace {

// One row of utilization_raw after the header: "<die>,<util>,<counter>", "<die>,unavailable",
// "<die>,read_error" or "<die>,bogus(<util>),<counter>".
std::optional<PowerDieReading> ParseDieRow(std::string_view line) {
  using State = PowerDieReading::State;
  PowerDieReading r;
  const size_t comma = line.find(',');
  if (comma == std::string_view::npos || !Whole(line.substr(0, comma), &r.die)) return std::nullopt;
  std::string_view rest = line.substr(comma + 1);
  if (rest == "unavailable" || rest == "read_error") {
    r.state = rest == "unavailable" ? State::kUnavailable : State::kReadError;
    return r;
  }
  const size_t second = rest.find(',');
  if (second == std::string_view::npos || !Whole(rest.substr(second + 1), &r.counter)) {
    return std::nullopt;
  }
  std::string_view util = rest.substr(0, second);
  r.state = State::kGood;
  if (util.starts_with("bogus(") && util.ends_with(")")) {
    r.state = State::kBogus;
    util = util.substr(6, util.size() - 7);
  }
  if (!Whole(util, &r.util_bips)) return std::nullopt;
  return r;
}

}  // namespace

std::optional<std::vector<PowerDieReading>> ParsePowerRaw(std::string_view text) {
  constexpr std::string_view kHeader = "die,util_bips,counter\n";
  if (!text.starts_with(kHeader)) return std::nullopt;
  text.remove_prefix(kHeader.size());
  std::vector<PowerDieReading> rows;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    if (nl == std::string_view::npos) return std::nullopt;
    std::optional<PowerDieReading> row = ParseDieRow(text.substr(0, nl));
    if (!row) return std::nullopt;
    rows.push_back(*row);
    text.remove_prefix(nl + 1);
  }
  return rows;
}

std::optional<std::pair<int, std::string_view>> ParseNumberedState(std::string_view text) {
  const std::string_view t = StripNl(text);
  const size_t colon = t.find(": ");
  int n = 0;
  if (colon == std::string_view::npos || !Whole(t.substr(0, colon), &n) || n < 0) {
    return std::nullopt;
  }
  const std::string_view name = t.substr(colon + 2);
  if (name.empty()) return std::nullopt;
  return std::make_pair(n, name);
}

std::optional<double> ParseRateGbps(std::string_view text) {
  const std::string_view t = StripNl(text);
  const size_t space = t.find(' ');
  if (space == std::string_view::npos || t.substr(space).rfind(" Gb/sec", 0) != 0) {
    return std::nullopt;
  }
  double v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + space, v);
  if (ec != std::errc() || end != t.data() + space || v < 0) return std::nullopt;
  return v;
}

std::string Shown(std::string_view text) {
  std::string s(text.substr(0, 40));
  for (char& c : s) {
    if (c == '\n') {
      c = ' ';
    } else if (c < 0x20 || c > 0x7e) {
      c = '?';
    }
  }
  return fmt::format("\"{}\"", s);
}

}  // namespace neuron::counter_files
