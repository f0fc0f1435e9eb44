#include "driver-sim/driver/sim_tree_fs.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>
#include <optional>
#include <string>
#include <system_error>

#include "driver-sim/driver/sim_tree.h"

namespace neuron::sim {
namespace {

namespace fs = std::filesystem;

absl::Status ErrnoStatus(int err, std::string_view op, const fs::path& path) {
  const std::string msg = fmt::format("{} {}: {}", op, path.string(), std::strerror(err));
  if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(msg);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
  return absl::InternalError(msg);
}

absl::Status WriteAll(int fd, std::string_view data, const fs::path& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "write", path);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

// The kernel's devkmsg escaping (printk's msg_add_ext_text): unprintable bytes and '\'.
std::string EscapeKmsg(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (c < ' ' || c >= 127 || c == '\\') {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// seq of the last complete record in the open kmsg file, if any.
std::optional<uint64_t> LastKmsgSeq(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size == 0) return std::nullopt;
  // Records are short (the printk ioctl takes at most 511 bytes, 4x when escaped).
  const off_t want = std::min<off_t>(st.st_size, 8192);
  std::string tail(static_cast<size_t>(want), '\0');
  const ssize_t n = ::pread(fd, tail.data(), tail.size(), st.st_size - want);
  if (n <= 0) return std::nullopt;
  tail.resize(static_cast<size_t>(n));
  while (!tail.empty() && tail.back() == '\n') tail.pop_back();
  const size_t nl = tail.rfind('\n');
  std::string_view line(tail);
  if (nl != std::string::npos) line.remove_prefix(nl + 1);
  const size_t c1 = line.find(',');
  if (c1 == std::string_view::npos) return std::nullopt;
  const size_t c2 = line.find(',', c1 + 1);
  if (c2 == std::string_view::npos) return std::nullopt;
  uint64_t seq = 0;
  const auto [end, ec] = std::from_chars(line.data() + c1 + 1, line.data() + c2, seq);
  if (ec != std::errc() || end != line.data() + c2) return std::nullopt;
  return seq;
}

}  // namespace

absl::Status MakeDirs(const fs::path& dir) {
  if (dir.empty()) return absl::OkStatus();
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    return S_ISDIR(st.st_mode) ? absl::OkStatus() : ErrnoStatus(ENOTDIR, "mkdir", dir);
  }
  if (dir.has_parent_path() && dir.parent_path() != dir) {
    if (absl::Status s = MakeDirs(dir.parent_path()); !s.ok()) return s;
  }
  if (::mkdir(dir.c_str(), 0755) != 0) {
    if (errno == EEXIST) return absl::OkStatus();
    return ErrnoStatus(errno, "mkdir", dir);
  }
  if (::chmod(dir.c_str(), 0755) != 0) return ErrnoStatus(errno, "chmod", dir);
  return absl::OkStatus();
}

absl::Status MakeSymlink(std::string_view target, const fs::path& link) {
  if (absl::Status s = MakeDirs(link.parent_path()); !s.ok()) return s;
  const std::string t(target);
  if (::symlink(t.c_str(), link.c_str()) == 0) return absl::OkStatus();
  if (errno != EEXIST) return ErrnoStatus(errno, "symlink", link);
  // Replace atomically: a new link under a hidden name, renamed over the old one.
  const fs::path tmp =
      link.parent_path() / fmt::format(".{}.{}.link", link.filename().string(), ::getpid());
  ::unlink(tmp.c_str());
  if (::symlink(t.c_str(), tmp.c_str()) != 0) return ErrnoStatus(errno, "symlink", tmp);
  if (::rename(tmp.c_str(), link.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return ErrnoStatus(err, "rename", link);
  }
  return absl::OkStatus();
}

absl::Status WriteNewFile(const fs::path& path, std::string_view content, mode_t mode) {
  constexpr int kFlags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW;
  int fd = ::open(path.c_str(), kFlags, mode);
  if (fd < 0 && errno == ENOENT) {
    if (absl::Status s = MakeDirs(path.parent_path()); !s.ok()) return s;
    fd = ::open(path.c_str(), kFlags, mode);
  }
  if (fd < 0) return ErrnoStatus(errno, "create", path);
  absl::Status s = WriteAll(fd, content, path);
  // The umask may have narrowed the mode given to open.
  if (s.ok() && ::fchmod(fd, mode) != 0) s = ErrnoStatus(errno, "chmod", path);
  if (::close(fd) != 0 && s.ok()) s = ErrnoStatus(errno, "close", path);
  return s;
}

absl::Status RemovePath(const fs::path& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) {
    return absl::InternalError(fmt::format("remove {}: {}", path.string(), ec.message()));
  }
  return absl::OkStatus();
}

absl::Status RenamePath(const fs::path& from, const fs::path& to) {
  if (::rename(from.c_str(), to.c_str()) == 0) return absl::OkStatus();
  if (errno != ENOTEMPTY && errno != EEXIST && errno != EISDIR) {
    return ErrnoStatus(errno, "rename", to);
  }
  if (absl::Status s = RemovePath(to); !s.ok()) return s;
  if (::rename(from.c_str(), to.c_str()) != 0) return ErrnoStatus(errno, "rename", to);
  return absl::OkStatus();
}

absl::Status WriteFileAtomic(const fs::path& path, std::string_view content) {
  return WriteFileAtomic(path, content, 0644);
}

absl::Status WriteFileAtomic(const fs::path& path, std::string_view content, mode_t mode) {
  // A unique hidden temporary name in the same directory, so concurrent writers of one file
  // never share a temporary and the rename stays within one filesystem.
  const std::string pattern =
      path.parent_path() / fmt::format(".{}.XXXXXX", path.filename().string());
  std::string tmpl = pattern;  // mkstemp rewrites it, even when it fails
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0 && errno == ENOENT) {
    if (absl::Status s = MakeDirs(path.parent_path()); !s.ok()) return s;
    tmpl = pattern;
    fd = ::mkstemp(tmpl.data());
  }
  if (fd < 0) return ErrnoStatus(errno, "create", path);
  absl::Status s = WriteAll(fd, content, path);
  if (s.ok() && ::fchmod(fd, mode) != 0) s = ErrnoStatus(errno, "chmod", path);
  if (::close(fd) != 0 && s.ok()) s = ErrnoStatus(errno, "close", path);
  if (s.ok() && ::rename(tmpl.c_str(), path.c_str()) != 0) s = ErrnoStatus(errno, "rename", path);
  if (!s.ok()) ::unlink(tmpl.c_str());
  return s;
}

absl::StatusOr<uint64_t> AppendKmsgRecord(const fs::path& kmsg, int priority, std::string_view text,
                                          uint64_t min_seq) {
  int fd = ::open(kmsg.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 && errno == ENOENT) {
    if (absl::Status s = MakeDirs(kmsg.parent_path()); !s.ok()) return s;
    fd = ::open(kmsg.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  }
  if (fd < 0) return ErrnoStatus(errno, "open", kmsg);
  // The lock orders writers so each reads the last seq and appends before the next one looks.
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) {
      const int err = errno;
      ::close(fd);
      return ErrnoStatus(err, "flock", kmsg);
    }
  }
  uint64_t seq = min_seq;
  if (std::optional<uint64_t> last = LastKmsgSeq(fd)) seq = std::max(seq, *last + 1);
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  const uint64_t usec =
      static_cast<uint64_t>(ts.tv_sec) * 1000000 + static_cast<uint64_t>(ts.tv_nsec) / 1000;
  const std::string record = fmt::format("{},{},{},-;{}\n", priority, seq, usec, EscapeKmsg(text));
  // One write: a reader never sees part of a record (O_APPEND regular-file writes this small
  // are not split).
  const ssize_t n = ::write(fd, record.data(), record.size());
  const int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(record.size())) {
    return n < 0 ? ErrnoStatus(err, "write", kmsg)
                 : absl::InternalError(fmt::format("short write to {}", kmsg.string()));
  }
  return seq;
}

}  // namespace neuron::sim
