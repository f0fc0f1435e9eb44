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

#include "tests/support/process.h"

namespace neuron::sim::testing {

using ::neuron::testing::ReadFile;
using ::neuron::testing::Spawn;
using ::neuron::testing::Stop;
using ::neuron::testing::WaitExit;
using ::neuron::testing::WaitUntil;

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// A counter file's value ("%llu\n"), or nullopt when missing or malformed.
inline std::optional<uint64_t> ReadU64File(const fs::path& p) {
  const std::string text = ReadFile(p);
  uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || std::string_view(ptr) != "\n") return std::nullopt;
  return v;
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
