#include "core/base/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace neuron {
namespace {

absl::Status ErrnoError(int err, std::string_view op, const std::filesystem::path& path) {
  const std::string msg = fmt::format("{} {}: {}", op, path.string(), std::strerror(err));
  if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(msg);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
  return absl::UnavailableError(msg);
}

absl::Status Malformed(const std::filesystem::path& path, std::string_view text,
                       std::string_view expected) {
  std::string shown(text.substr(0, 40));
  for (char& c : shown) {
    if (c == '\n') c = ' ';
  }
  return absl::DataLossError(
      fmt::format("{}: malformed value \"{}\" (expected {})", path.string(), shown, expected));
}

// Reads `fd` to its end and closes it. More than `max_bytes` is `too_large` (a sysfs attribute
// that long is not one: DataLoss; a file the caller bounds: OutOfRange). With `short_read_ends`,
// a read that does not fill the buffer is taken as the end, sparing the read that would return
// 0: a sysfs attribute's text is made by one show() call, at most a page, and handed out whole
// by the first read of a page-sized buffer (systemd's read_virtual_file relies on the same), and
// a regular file's read comes back short only at its end. On a trn2.48xlarge that is ~370 of
// neuron-ls's syscalls.
absl::StatusOr<std::string> ReadFd(int fd, const std::filesystem::path& display, uint64_t max_bytes,
                                   absl::StatusCode too_large, bool short_read_ends = false) {
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return ErrnoError(err, "read", display);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) {
      ::close(fd);
      return absl::Status(too_large,
                          fmt::format("{}: larger than {} bytes", display.string(), max_bytes));
    }
    if (short_read_ends && static_cast<size_t>(n) < sizeof(buf)) break;
  }
  ::close(fd);
  return out;
}

// The whole of `text` is one number in `base`; no sign for unsigned types, no spaces.
template <typename T>
bool ParseWhole(std::string_view text, int base, T* out) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out, base);
  return ec == std::errc() && end == text.data() + text.size();
}

std::vector<std::string_view> Split(std::string_view text, std::string_view sep) {
  std::vector<std::string_view> parts;
  for (;;) {
    const size_t at = text.find(sep);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return parts;
    text.remove_prefix(at + sep.size());
  }
}

}  // namespace

absl::StatusOr<std::string> ReadAttribute(const std::filesystem::path& path) {
  return ReadAttributeAt(AT_FDCWD, path.c_str(), path);
}

absl::StatusOr<std::string> ReadAttributeAt(int dir_fd, const char* relative,
                                            const std::filesystem::path& display) {
  const int fd = ::openat(dir_fd, relative, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return ErrnoError(errno, "open", display);
  return ReadFd(fd, display, kMaxAttributeBytes, absl::StatusCode::kDataLoss,
                /*short_read_ends=*/true);
}

std::string_view StripNewline(std::string_view text) {
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  return text;
}

absl::StatusOr<uint64_t> ParseU64(std::string_view text, const std::filesystem::path& path) {
  uint64_t out = 0;
  if (!ParseWhole(StripNewline(text), 10, &out)) {
    return Malformed(path, text, "an unsigned integer");
  }
  return out;
}

absl::StatusOr<int64_t> ParseI64(std::string_view text, const std::filesystem::path& path) {
  const std::string_view v = StripNewline(text);
  int64_t out = 0;
  // from_chars accepts a leading '-' for signed types but never '+' or spaces, as %d prints.
  if (!ParseWhole(v, 10, &out)) return Malformed(path, text, "an integer");
  return out;
}

absl::StatusOr<uint32_t> ParseHex(std::string_view text, const std::filesystem::path& path) {
  std::string_view v = StripNewline(text);
  uint32_t out = 0;
  if (!v.starts_with("0x") || !ParseWhole(v.substr(2), 16, &out)) {
    return Malformed(path, text, "a hexadecimal id like 0x1d0f");
  }
  return out;
}

absl::StatusOr<std::vector<int>> ParseCpuList(std::string_view text,
                                              const std::filesystem::path& path) {
  std::vector<int> cpus;
  const std::string_view v = StripNewline(text);
  if (v.empty()) return cpus;
  // A set, not a list: overlapping ranges ("0-31,16-47", found by fuzzing) must not repeat
  // CPUs, and a repeated "0-65535" must not grow memory with every repetition.
  std::vector<bool> listed(65536);
  for (std::string_view part : Split(v, ",")) {
    const size_t dash = part.find('-');
    int lo = 0, hi = 0;
    if (!ParseWhole(part.substr(0, dash), 10, &lo) || lo < 0) {
      return Malformed(path, text, "a CPU list like 0-31,64-95");
    }
    hi = lo;
    if (dash != std::string_view::npos &&
        (!ParseWhole(part.substr(dash + 1), 10, &hi) || hi < lo)) {
      return Malformed(path, text, "a CPU list like 0-31,64-95");
    }
    if (hi > 65535) return Malformed(path, text, "CPU numbers below 65536");
    for (int c = lo; c <= hi; ++c) listed[c] = true;
  }
  for (int c = 0; c < static_cast<int>(listed.size()); ++c) {
    if (listed[c]) cpus.push_back(c);
  }
  return cpus;
}

absl::StatusOr<std::vector<int>> ParseIdList(std::string_view text,
                                             const std::filesystem::path& path) {
  std::vector<int> ids;
  const std::string_view v = StripNewline(text);
  if (v.empty()) return ids;
  for (std::string_view part : Split(v, ", ")) {
    int id = 0;
    if (!ParseWhole(part, 10, &id) || id < 0 || id > 1023) {
      return Malformed(path, text, "device ids separated by \", \"");
    }
    ids.push_back(id);
  }
  return ids;
}

absl::StatusOr<uint64_t> ReadU64(const std::filesystem::path& path) {
  absl::StatusOr<std::string> text = ReadAttribute(path);
  if (!text.ok()) return text.status();
  return ParseU64(*text, path);
}

absl::StatusOr<int64_t> ReadI64(const std::filesystem::path& path) {
  absl::StatusOr<std::string> text = ReadAttribute(path);
  if (!text.ok()) return text.status();
  return ParseI64(*text, path);
}

absl::StatusOr<std::string> ReadText(const std::filesystem::path& path) {
  absl::StatusOr<std::string> text = ReadAttribute(path);
  if (!text.ok()) return text.status();
  return std::string(StripNewline(*text));
}

absl::StatusOr<std::string> ReadWholeFile(const std::filesystem::path& path, uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "open", path);
  return ReadFd(fd, path, max_bytes, absl::StatusCode::kOutOfRange);
}

absl::Status ReplaceFile(const std::filesystem::path& path, std::string_view content) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, "open", tmp);
  for (size_t done = 0; done < content.size();) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return ErrnoError(err, "write", tmp);
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return ErrnoError(err, "write", tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return ErrnoError(err, "rename to", path);
  }
  return absl::OkStatus();
}

std::vector<std::string> ListDir(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  ::closedir(d);
  return names;
}

}  // namespace neuron
