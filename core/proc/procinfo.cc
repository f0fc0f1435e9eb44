#include "core/proc/procinfo.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <set>

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

std::map<fs::path, std::vector<int>> ProcReader::PidsWithOpen(const std::vector<fs::path>& targets,
                                                              FdScanProblems* problems) const {
  std::map<std::string, fs::path, std::less<>> wanted;  // as the kernel may print it -> as given
  for (const fs::path& t : targets) {
    wanted.emplace(t.lexically_normal().string(), t);
    std::error_code ec;
    const fs::path canonical = fs::weakly_canonical(t, ec);
    if (!ec) wanted.emplace(canonical.string(), t);
  }
  std::map<fs::path, std::vector<int>> out;
  DIR* proc = ::opendir(proc_dir_.c_str());
  if (proc == nullptr) return out;
  while (const dirent* e = ::readdir(proc)) {
    int pid = 0;
    if (!ParseNumber(std::string_view(e->d_name), &pid) || pid <= 0) continue;
    const std::string fd_dir = fmt::format("{}/{}/{}", proc_dir_.string(), pid, procfs::kFdDir);
    DIR* fds = ::opendir(fd_dir.c_str());
    if (fds == nullptr) {
      if (problems != nullptr && (errno == EACCES || errno == EPERM)) {
        if (problems->processes++ == 0) {
          problems->first = fmt::format("open {}: {}", fd_dir, std::strerror(errno));
        }
      }
      continue;  // gone, or not ours to read
    }
    std::set<fs::path> held;
    while (const dirent* f = ::readdir(fds)) {
      if (f->d_name[0] == '.') continue;
      char buf[4096];
      const ssize_t n = ::readlinkat(::dirfd(fds), f->d_name, buf, sizeof(buf));
      if (n <= 0 || static_cast<size_t>(n) >= sizeof(buf)) continue;
      const auto it = wanted.find(std::string_view(buf, static_cast<size_t>(n)));
      if (it != wanted.end()) held.insert(it->second);
    }
    ::closedir(fds);
    for (const fs::path& t : held) out[t].push_back(pid);
  }
  ::closedir(proc);
  for (auto& [target, pids] : out) std::sort(pids.begin(), pids.end());
  return out;
}

int64_t ProcReader::TicksPerSecond() {
  static const int64_t ticks = [] {
    const int64_t t = ::sysconf(_SC_CLK_TCK);
    return t > 0 ? t : int64_t{100};
  }();
  return ticks;
}

}  // namespace neuron
