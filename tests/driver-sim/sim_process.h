#pragma once
// Helpers for tests that run the real neuron-sim binary: spawning with output in files, waiting
// with ceilings (DESIGN decision 15), reading counter files, and a simulated node per test that
// stops cleanly on SIGTERM. Header-only, for the daemon-runtime and workload tests.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace neuron::sim::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

inline std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A counter file's value ("%llu\n"), or nullopt when missing or malformed.
inline std::optional<uint64_t> ReadU64File(const fs::path& p) {
  const std::string text = ReadFile(p);
  uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || std::string_view(ptr) != "\n") return std::nullopt;
  return v;
}

inline bool WaitUntil(const std::function<bool()>& pred, std::chrono::milliseconds ceiling) {
  const auto deadline = std::chrono::steady_clock::now() + ceiling;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return pred();
}

// Starts `args` with stdout/stderr in files; the environment is ours without NEURON_ROOT and
// NEURON_RT_*, plus `env`.
inline pid_t Spawn(std::vector<std::string> args, const fs::path& out, const fs::path& err,
                   const std::vector<std::string>& env = {}) {
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view v(*e);
    if (!v.starts_with("NEURON_ROOT=") && !v.starts_with("NEURON_RT_")) envs.emplace_back(v);
  }
  envs.insert(envs.end(), env.begin(), env.end());
  auto argv_of = [](std::vector<std::string>& v) {
    std::vector<char*> a;
    for (std::string& s : v) a.push_back(s.data());
    a.push_back(nullptr);
    return a;
  };
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> argv = argv_of(args);
  std::vector<char*> envp = argv_of(envs);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  EXPECT_EQ(rc, 0) << "posix_spawn " << args[0];
  return rc == 0 ? pid : -1;
}

// Exit code (128 + signal when killed), or nullopt when still running at the ceiling.
inline std::optional<int> WaitExit(pid_t pid, std::chrono::milliseconds ceiling) {
  const auto deadline = std::chrono::steady_clock::now() + ceiling;
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0) return std::nullopt;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(20ms);
  }
}

// Stops `pid` with SIGTERM (SIGKILL after `ceiling`) and returns its exit code.
inline std::optional<int> Stop(pid_t pid, std::chrono::milliseconds ceiling) {
  kill(pid, SIGTERM);
  std::optional<int> code = WaitExit(pid, ceiling);
  if (!code) {
    kill(pid, SIGKILL);
    WaitExit(pid, 10s);
  }
  return code;
}

// `neuron-sim up` in `root` for one test; stopped with SIGTERM in the destructor, which must
// exit 0 (a sanitizer report inside the daemon changes the exit code and fails the test).
class SimNode {
 public:
  SimNode(fs::path bin, fs::path root, fs::path logs) : bin_(bin), root_(root), logs_(logs) {}
  ~SimNode() {
    if (pid_ <= 0) return;
    const std::optional<int> code = Stop(pid_, 90s);
    EXPECT_EQ(code, 0) << "neuron-sim up did not stop cleanly:\n" << ReadFile(err_);
  }

  // Starts the daemon and waits for sim.ready.
  void Up(const std::string& instance, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv{bin_.string(),  "up",         "--root",
                                  root_.string(), "--instance", instance};
    argv.insert(argv.end(), extra.begin(), extra.end());
    err_ = logs_ / "up.err";
    pid_ = Spawn(argv, logs_ / "up.out", err_);
    ASSERT_TRUE(WaitUntil([&] { return fs::exists(root_ / "run/neuron/sim.ready"); }, 90s))
        << "no sim.ready under " << root_ << ":\n"
        << ReadFile(err_);
  }

  const fs::path& root() const { return root_; }
  fs::path Device(int n) const {
    return root_ / ("sys/devices/virtual/neuron_device/neuron" + std::to_string(n));
  }
  fs::path Core(int device, int core) const {
    return Device(device) / ("neuron_core" + std::to_string(core));
  }
  std::string DaemonLog() const { return ReadFile(err_); }

 private:
  fs::path bin_, root_, logs_, err_;
  pid_t pid_ = -1;
};

}  // namespace neuron::sim::testing
