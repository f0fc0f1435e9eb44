#pragma once
// Shared pieces of the libnrt-sim tests: a simulated node per test (SimTree on a TempDir and
// the driver's device ABI served from a thread, no daemon), NEFF building, datastore reads,
// forked children and stderr capture. Header-only; each test links nrt_sim and runs under the
// simulated driver's interposer (tests/CMakeLists.txt NEURON_SIM_DRIVER_ENV).

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "core/base/unique_fd.h"
#include "core/driver/datastore_layout.h"
#include "core/driver/sysfs_names.h"
#include "core/model/catalog.h"
#include "driver-sim/driver/faults.h"
#include "driver-sim/driver/sim_tree.h"
#include "driver-sim/runtime/testing.h"
#include "nrt/nrt.h"
#include "nrt/nrt_experimental.h"
#include "nrt/nrtsim.h"
#include "tests/support/driver_abi_client.h"
#include "tests/support/sim_driver_thread.h"
#include "tests/support/sim_testing.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace neuron::nrt::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
// The one wait helper (tests/support/subprocess.h), for the runtime tests that name it unqualified.
using ::neuron::testing::WaitUntil;

inline std::string ReadFileText(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runtime environment variables a test may set; cleared before and after every test.
inline void ClearRuntimeEnv() {
  for (const char* v : {"NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES", "NEURON_RT_EXEC_TIMEOUT",
                        "NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS", "NEURON_RT_ROOT_COMM_ID",
                        "NEURON_SIM_CLOCK", "NEURON_PROCESS_TAG", "NEURON_RT_LOG_LEVEL"}) {
    ::unsetenv(v);
  }
}

// A simulated node (the tree and node.json, the driver's device ABI on a thread, no daemon)
// with NEURON_ROOT pointing at it, so the runtime's /dev/neuronN are the tree's devices.
class SimNodeTest : public ::testing::Test {
 protected:
  void MakeNode(const char* instance, int lnc = 0) {
    root_ = std::make_unique<RootPaths>(dir_.path());
    tree_ = neuron::testing::MakeSimTree(dir_.path(), instance, {.lnc = lnc});
    ASSERT_NE(tree_, nullptr);
    driver_ = std::make_unique<neuron::testing::SimDriverThread>(tree_.get(), *tree_->config().spec,
                                                                 tree_->config().lnc);
    ASSERT_TRUE(driver_->status().ok()) << driver_->status();
    ::setenv("NEURON_ROOT", dir_.str().c_str(), 1);
  }
  void SetUp() override { ClearRuntimeEnv(); }
  void TearDown() override {
    nrt_close();
    SetClockForTesting(nullptr);
    ClearRuntimeEnv();
    ::unsetenv("NEURON_ROOT");
  }

  const RootPaths& root() const { return *root_; }

  // The PID's datastore counter for (device, logical core in the device, NC index), read as a
  // monitor reads it; UINT64_MAX when the PID has no datastore there.
  uint64_t DsCounter(int device, int core, int index, pid_t pid = ::getpid()) const {
    const std::optional<size_t> off = nds::CoreCounterOffset(core, index);
    return off ? DsWord(device, *off, pid) : UINT64_MAX;
  }
  uint64_t DsWord(int device, size_t offset, pid_t pid = ::getpid()) const {
    return neuron::testing::ReadDatastoreWord(root_->DevNeuron(device), pid, offset)
        .value_or(UINT64_MAX);
  }

  // Writes faults.json as the daemon would, then makes the runtime notice it now.
  void WriteFaults(const std::vector<sim::PendingFault>& faults) {
    ASSERT_TRUE(sim::WriteFileAtomic(sim::FaultsPath(*root_), sim::FaultsToJson(faults)).ok());
    RefreshForTesting();
  }
  void SetDeviceState(int device, int state) {
    ASSERT_TRUE(
        sim::WriteFileAtomic(root_->NeuronDevice(device) / "reset", std::to_string(state) + "\n")
            .ok());
  }

  neuron::testing::TempDir dir_{"nrt_test"};
  std::unique_ptr<RootPaths> root_;
  std::unique_ptr<sim::SimTree> tree_;
  std::unique_ptr<neuron::testing::SimDriverThread> driver_;  // after tree_: stops first
};

// A NEURON_RT_ROOT_COMM_ID on this machine that nobody listens on: the port the kernel gives a
// socket bound to port 0, so tests running in parallel never share a world.
inline std::string FreeCommId(const char* host = "127.0.0.1") {
  const UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  ::inet_pton(AF_INET, host, &addr.sin_addr);
  socklen_t len = sizeof(addr);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ADD_FAILURE() << "cannot bind a port on " << host;
  }
  return std::string(host) + ":" + std::to_string(ntohs(addr.sin_port));
}

// A NEFF from an op list; fails the test when the op list is rejected.
inline std::string Neff(const std::string& ops_json, nrtsim_neff_options_t opts = {}) {
  void* buf = nullptr;
  size_t size = 0;
  const NRT_STATUS s = nrtsim_build_neff(ops_json.c_str(), &opts, &buf, &size);
  EXPECT_EQ(s, NRT_SUCCESS) << nrtsim_last_error();
  if (s != NRT_SUCCESS) return {};
  std::string out(static_cast<const char*>(buf), size);
  nrtsim_free_neff(buf);
  return out;
}

// {"version":1,"ops":[...]} around a list of ops.
inline std::string Ops(const std::string& ops) { return R"({"version": 1, "ops": [)" + ops + "]}"; }

inline nrt_model_t* Load(const std::string& neff, int32_t vnc = -1) {
  nrt_model_t* m = nullptr;
  EXPECT_EQ(nrt_load(neff.data(), neff.size(), vnc, -1, &m), NRT_SUCCESS);
  return m;
}

// Runs `body` in a forked child whose exit code is body's result (stderr to `err` if given).
inline pid_t Fork(const std::function<int()>& body, const fs::path& err = {}) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (!err.empty()) {
      const UniqueFd fd(::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644));
      ::dup2(fd.get(), 2);
    }
    const int code = body();
    std::fflush(nullptr);
    ::_exit(code);
  }
  return pid;
}

// The child's exit code, -signal if it was killed, -1000 if it outlived `ceiling`.
inline int WaitChild(pid_t pid, std::chrono::milliseconds ceiling = 60s) {
  const auto deadline = std::chrono::steady_clock::now() + ceiling;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    std::this_thread::sleep_for(10ms);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return -1000;
}

// Captures what this process writes to stderr while alive.
class StderrCapture {
 public:
  explicit StderrCapture(const fs::path& file) : file_(file) {
    std::fflush(stderr);
    saved_.Reset(::dup(2));
    const UniqueFd fd(::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644));
    ::dup2(fd.get(), 2);
  }
  ~StderrCapture() { Restore(); }
  std::string Text() {
    std::fflush(stderr);
    return ReadFileText(file_);
  }
  void Restore() {
    if (!saved_) return;
    std::fflush(stderr);
    ::dup2(saved_.get(), 2);
    saved_.Reset();
  }

 private:
  fs::path file_;
  UniqueFd saved_;  // the original stderr while captured
};

}  // namespace neuron::nrt::testing
