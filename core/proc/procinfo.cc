#include "core/proc/procinfo.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <set>

#include "core/base/file_io.h"
#include "core/base/unique_fd.h"

namespace neuron {
namespace {

namespace fs = std::filesystem;

absl::Status ErrnoError(int err, std::string_view op, const std::string& path) {
  const std::string msg = fmt::format("{} {}: {}", op, path, std::strerror(err));
  // ESRCH: the process exited between open() and read().
  if (err == ENOENT || err == ENOTDIR || err == ESRCH) return absl::NotFoundError(msg);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
  return absl::UnavailableError(msg);
}

// Reads up to `max_bytes`; procfs files report size 0, so no stat().
absl::StatusOr<std::string> ReadUpTo(const std::string& path, size_t max_bytes) {
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError(errno, "open", path);
  std::string out;
  char buf[4096];
  while (out.size() < max_bytes) {
    const size_t want = std::min(sizeof(buf), max_bytes - out.size());
    const ssize_t n = ::read(fd.get(), buf, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, "read", path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

template <typename T>
bool ParseNumber(std::string_view text, T* out) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

absl::Status Malformed(std::string_view source, std::string_view why) {
  return absl::DataLossError(fmt::format("{}: malformed ({})", source, why));
}

}  // namespace

absl::StatusOr<SystemCpuTimes> ParseSystemCpuTimes(std::string_view text, std::string_view source) {
  SystemCpuTimes t;
  bool seen_total = false;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (!line.starts_with("cpu")) continue;
    const std::vector<std::string_view> f = Fields(line);
    if (f.empty()) continue;
    if (f[0] != "cpu") {
      int n = 0;
      if (ParseNumber(f[0].substr(3), &n)) ++t.cpus;
      continue;
    }
    // Kernels before 2.6.11 print fewer columns; what is missing stays 0.
    std::array<uint64_t*, 8> dest{&t.user,   &t.nice, &t.system,  &t.idle,
                                  &t.iowait, &t.irq,  &t.softirq, &t.steal};
    if (f.size() < 5) return Malformed(source, "the cpu line has fewer than 4 values");
    for (size_t i = 0; i < dest.size() && i + 1 < f.size(); ++i) {
      if (!ParseNumber(f[i + 1], dest[i])) {
        return Malformed(source, fmt::format("\"{}\" is not a tick count", f[i + 1]));
      }
    }
    seen_total = true;
  }
  if (!seen_total) return Malformed(source, "no cpu line");
  return t;
}

absl::StatusOr<ProcessStat> ParseProcessStat(std::string_view text, std::string_view source) {
  ProcessStat s;
  const size_t open = text.find('(');
  const size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return Malformed(source, "no (comm)");
  }
  const std::vector<std::string_view> head = Fields(text.substr(0, open));
  if (head.size() != 1 || !ParseNumber(head[0], &s.pid)) return Malformed(source, "no pid");
  s.comm = std::string(text.substr(open + 1, close - open - 1));
  std::string_view rest = text.substr(close + 1);
  while (!rest.empty() && (rest.back() == '\n' || rest.back() == ' ')) rest.remove_suffix(1);
  const std::vector<std::string_view> f = Fields(rest);
  // f[0] is field (3); field (n) is f[n - 3].
  if (f.size() < 22) return Malformed(source, "fewer than 24 fields");
  if (f[0].size() != 1) return Malformed(source, "state is not one character");
  s.state = f[0][0];
  if (!ParseNumber(f[4 - 3], &s.ppid) || !ParseNumber(f[14 - 3], &s.utime) ||
      !ParseNumber(f[15 - 3], &s.stime) || !ParseNumber(f[16 - 3], &s.cutime) ||
      !ParseNumber(f[17 - 3], &s.cstime) || !ParseNumber(f[22 - 3], &s.start_time) ||
      !ParseNumber(f[24 - 3], &s.rss_pages)) {
    return Malformed(source,
                     "ppid, utime, stime, cutime, cstime, starttime or rss is not a number");
  }
  return s;
}

std::string FormatCommandLine(std::string_view raw) {
  std::string out(raw);
  for (char& c : out) {
    if (c == '\0' || c == '\n' || c == '\t') c = ' ';
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

ProcReader::ProcReader(const RootPaths& root) {
  std::error_code ec;
  const fs::path under_root = root.Proc();
  // ROOT "/" gives "/proc" itself; any other ROOT with a proc directory is the host's /proc.
  if (fs::is_directory(under_root, ec)) {
    proc_dir_ = under_root;
    uses_root_proc_ = root.root() != fs::path("/");
  } else {
    proc_dir_ = RootPaths("/").Proc();
    uses_root_proc_ = false;
  }
}

ProcReader ProcReader::AtDirectory(fs::path proc_dir) {
  return ProcReader(std::move(proc_dir), true);
}

absl::StatusOr<std::string> ProcReader::ReadProcFile(int pid, const char* name,
                                                     size_t max_bytes) const {
  if (pid <= 0) return absl::InvalidArgumentError(fmt::format("invalid pid {}", pid));
  return ReadUpTo(fmt::format("{}/{}/{}", proc_dir_.string(), pid, name), max_bytes);
}

absl::StatusOr<SystemCpuTimes> ProcReader::SystemCpu() const {
  const std::string path = (proc_dir_ / procfs::kStat).string();
  // 192 vCPUs print about 16 KiB; 1 MiB leaves room for the largest hosts.
  absl::StatusOr<std::string> text = ReadUpTo(path, 1 << 20);
  if (!text.ok()) return text.status();
  return ParseSystemCpuTimes(*text, path);
}

absl::StatusOr<ProcessStat> ProcReader::Stat(int pid) const {
  absl::StatusOr<std::string> text = ReadProcFile(pid, procfs::kStat.data(), 4096);
  if (!text.ok()) return text.status();
  return ParseProcessStat(*text, fmt::format("{}/{}/{}", proc_dir_.string(), pid, procfs::kStat));
}

absl::StatusOr<std::string> ProcReader::CommandLine(int pid, size_t max_bytes) const {
  absl::StatusOr<std::string> raw = ReadProcFile(pid, procfs::kCmdline.data(), max_bytes);
  if (!raw.ok()) return raw.status();
  std::string line = FormatCommandLine(*raw);
  if (!line.empty()) return line;
  absl::StatusOr<ProcessStat> st = Stat(pid);
  if (!st.ok()) return st.status();
  return "[" + st->comm + "]";
}

absl::StatusOr<std::string> ProcReader::Cgroup(int pid) const {
  return ReadProcFile(pid, procfs::kCgroup.data(), size_t{64} * 1024);
}

namespace {

// The access mode (O_ACCMODE bits) descriptor `fd` of `pid` was opened with, from the "flags:"
// line of its fdinfo (octal); nullopt when it cannot be read (the process exited).
std::optional<int> AccessMode(int proc_fd, std::string_view pid, std::string_view fd) {
  const std::string rel = fmt::format("{}/{}/{}", pid, procfs::kFdInfoDir, fd);
  const UniqueFd info(::openat(proc_fd, rel.c_str(), O_RDONLY | O_CLOEXEC));
  if (!info.valid()) return std::nullopt;
  char buf[256];
  const ssize_t n = ::read(info.get(), buf, sizeof(buf) - 1);
  if (n <= 0) return std::nullopt;
  const std::string_view text(buf, static_cast<size_t>(n));
  const size_t at = text.find("flags:");
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view octal = text.substr(at + 6);
  while (!octal.empty() && (octal.front() == '\t' || octal.front() == ' ')) octal.remove_prefix(1);
  unsigned flags = 0;
  const auto [end, ec] = std::from_chars(octal.data(), octal.data() + octal.size(), flags, 8);
  if (ec != std::errc() || end == octal.data()) return std::nullopt;
  return static_cast<int>(flags & O_ACCMODE);
}

}  // namespace

ProcReader::DeviceHolders ProcReader::HoldersOf(const std::vector<dev_t>& devices) const {
  DeviceHolders out;
  const std::set<dev_t> wanted(devices.begin(), devices.end());
  if (wanted.empty()) return out;
  const UniqueFd proc(::open(proc_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  DIR* pids = proc.valid() ? ::fdopendir(::dup(proc.get())) : nullptr;
  if (pids == nullptr) return out;
  while (const dirent* e = ::readdir(pids)) {
    int pid = 0;
    if (!ParseNumber(std::string_view(e->d_name), &pid) || pid <= 0) continue;
    const std::string fd_dir = fmt::format("{}/{}", e->d_name, procfs::kFdDir);
    const int dir_fd = ::openat(proc.get(), fd_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR* fds = dir_fd >= 0 ? ::fdopendir(dir_fd) : nullptr;
    if (fds == nullptr) {
      const int err = errno;
      if (dir_fd >= 0) ::close(dir_fd);
      if ((err == EACCES || err == EPERM) && out.problems.processes++ == 0) {
        out.problems.first =
            fmt::format("open {}/{}: {}", proc_dir_.string(), fd_dir, std::strerror(err));
      }
      continue;  // gone, or not ours to read
    }
    ++out.processes;
    std::set<dev_t> held;
    while (const dirent* f = ::readdir(fds)) {
      if (f->d_name[0] == '.') continue;
      ++out.descriptors;
      struct statx stx {};
      if (::statx(::dirfd(fds), f->d_name, AT_STATX_DONT_SYNC | AT_NO_AUTOMOUNT, STATX_TYPE,
                  &stx) != 0 ||
          !S_ISCHR(stx.stx_mode)) {
        continue;
      }
      const dev_t number = makedev(stx.stx_rdev_major, stx.stx_rdev_minor);
      if (!wanted.contains(number) || held.contains(number)) continue;
      if (AccessMode(proc.get(), e->d_name, f->d_name) == O_WRONLY) continue;
      held.insert(number);
    }
    ::closedir(fds);
    for (const dev_t d : held) out.pids[d].push_back(pid);
  }
  ::closedir(pids);
  for (auto& [device, list] : out.pids) std::sort(list.begin(), list.end());
  return out;
}

std::optional<std::string> ProcReader::MissesProcesses() const {
  if (uses_root_proc_) return std::nullopt;
  std::error_code ec;
  const fs::path ns = fs::read_symlink(proc_dir_ / procfs::kSelfPidNamespace, ec);
  // The initial PID namespace's inode number (PROC_PID_INIT_INO in Linux's
  // include/linux/proc_ns.h, fixed since 3.8).
  if (!ec && ns == "pid:[4026531836]") return std::nullopt;
  return fmt::format(
      "{} is this process's own and shows only its PID namespace ({}), not every process of "
      "the node; mount the host's /proc under --root",
      proc_dir_.string(), ec ? ec.message() : ns.string());
}

std::optional<int> ProcReader::SelfPid() const {
  std::error_code ec;
  const fs::path link = fs::read_symlink(proc_dir_ / procfs::kSelf, ec);
  int pid = 0;
  if (ec || !ParseNumber(link.filename().string(), &pid) || pid <= 0) return std::nullopt;
  return pid;
}

absl::StatusOr<dev_t> ParseDeviceNumber(std::string_view text, std::string_view source) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  const size_t colon = text.find(':');
  unsigned major_number = 0;
  unsigned minor_number = 0;
  if (colon == std::string_view::npos || !ParseNumber(text.substr(0, colon), &major_number) ||
      !ParseNumber(text.substr(colon + 1), &minor_number)) {
    return Malformed(source, fmt::format("\"{}\" is not <major>:<minor>", text));
  }
  return makedev(major_number, minor_number);
}

absl::StatusOr<dev_t> NeuronDeviceNumber(const RootPaths& root, int index) {
  const fs::path file = root.NeuronDevice(index) / sysfs::kDevNumber;
  absl::StatusOr<std::string> text = ReadAttribute(file);
  if (!text.ok()) return text.status();
  return ParseDeviceNumber(*text, file.string());
}

int64_t ProcReader::TicksPerSecond() {
  static const int64_t ticks = [] {
    const int64_t t = ::sysconf(_SC_CLK_TCK);
    return t > 0 ? t : int64_t{100};
  }();
  return ticks;
}

}  // namespace neuron
