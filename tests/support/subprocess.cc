#include "tests/support/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>

extern char** environ;

namespace neuron::testing {
namespace {

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::optional<uint64_t> ReadU64File(const std::filesystem::path& p) {
  const std::string text = ReadFile(p);
  uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || std::string_view(ptr) != "\n") return std::nullopt;
  return v;
}

void WriteFile(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  const std::filesystem::path tmp = p.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
  }
  std::filesystem::rename(tmp, p);
}

bool WaitUntil(const std::function<bool()>& pred, std::chrono::milliseconds ceiling) {
  const auto deadline = std::chrono::steady_clock::now() + ceiling;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

pid_t StartProcess(std::vector<std::string> args, const std::filesystem::path& out,
                   const std::filesystem::path& err, const std::vector<std::string>& env,
                   std::string* error) {
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view v(*e);
    if (!v.starts_with("NEURON_ROOT=") && !v.starts_with("NEURON_RT_")) envs.emplace_back(v);
  }
  envs.insert(envs.end(), env.begin(), env.end());
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out.empty() ? "/dev/null" : out.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err.empty() ? "/dev/null" : err.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> argv = Pointers(args);
  std::vector<char*> envp = Pointers(envs);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc == 0) return pid;
  if (error != nullptr) *error = "posix_spawn " + args[0] + ": " + std::strerror(rc);
  return -1;
}

std::optional<int> WaitExit(pid_t pid, std::chrono::milliseconds ceiling) {
  if (pid <= 0) return std::nullopt;
  const auto deadline = std::chrono::steady_clock::now() + ceiling;
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0) return std::nullopt;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::optional<int> Stop(pid_t pid, std::chrono::milliseconds ceiling) {
  if (pid <= 0) return std::nullopt;
  ::kill(pid, SIGTERM);
  std::optional<int> code = WaitExit(pid, ceiling);
  if (!code) {
    ::kill(pid, SIGKILL);
    WaitExit(pid, std::chrono::seconds(10));
  }
  return code;
}

RunResult RunCommand(const std::filesystem::path& work, std::vector<std::string> args,
                     const std::vector<std::string>& env, std::chrono::milliseconds ceiling) {
  static std::atomic<int> counter{0};
  const std::string tag = std::to_string(::getpid()) + "." + std::to_string(++counter);
  const std::filesystem::path out = work / ("run." + tag + ".out");
  const std::filesystem::path err = work / ("run." + tag + ".err");
  RunResult r;
  const pid_t pid = StartProcess(std::move(args), out, err, env, &r.err);
  if (pid < 0) return r;
  std::optional<int> code = WaitExit(pid, ceiling);
  if (!code) {
    ::kill(pid, SIGKILL);
    WaitExit(pid, std::chrono::seconds(10));
  }
  r.code = code.value_or(-1);
  r.out = ReadFile(out);
  r.err = ReadFile(err);
  std::error_code ec;
  std::filesystem::remove(out, ec);
  std::filesystem::remove(err, ec);
  return r;
}

int ListeningPort(const std::string& log) {
  static constexpr std::string_view kLine = "listening on port ";
  const size_t at = log.rfind(kLine);
  return at == std::string::npos ? 0 : std::atoi(log.c_str() + at + kLine.size());
}

ProcessUsage ReadUsage(pid_t pid) {
  namespace fs = std::filesystem;
  const fs::path proc = fs::path("/proc") / std::to_string(pid);
  const std::string main_comm = ReadFile(proc / "comm");
  ProcessUsage u;
  std::error_code ec;
  for (auto it = fs::directory_iterator(proc / "fd", ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    ++u.fds;
  }
  for (auto it = fs::directory_iterator(proc / "task", ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    ++u.threads;
    if (ReadFile(it->path() / "comm") != main_comm) ++u.library_threads;
  }
  std::ifstream status(proc / "status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) u.rss_kib = std::stoll(line.substr(6));
  }
  return u;
}

ProcessUsage QuietUsage(pid_t pid, int samples, std::chrono::milliseconds gap) {
  ProcessUsage least = ReadUsage(pid);
  for (int i = 1; i < samples; ++i) {
    std::this_thread::sleep_for(gap);
    const ProcessUsage u = ReadUsage(pid);
    least.fds = std::min(least.fds, u.fds);
    least.threads = std::min(least.threads, u.threads);
    least.library_threads = std::min(least.library_threads, u.library_threads);
    least.rss_kib = std::min(least.rss_kib, u.rss_kib);
  }
  return least;
}

}  // namespace neuron::testing
