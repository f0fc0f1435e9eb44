// The device plugin's system calls per second while nothing happens: an idle simulated
// trn1.32xlarge, registered with the kubelet emulator (its three ListAndWatch streams open, its
// PodResources refresh running), counted by attaching `strace -f -c` for 10 s. A count that does
// not depend on the machine, so CI checks it (bench/README.md#idle-cost) against the performance
// issue's target, 200 a second, so that no change adds a per-second poll unnoticed.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "driver-sim/kubelet/kubelet_emulator.h"
#include "tests/support/idle_syscalls.h"
#include "tests/support/process.h"
#include "tests/support/sanitizer.h"
#include "tests/support/sim_node.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// 138 a second here, 148 by hand over 20 s (about 1,500 before device states and presence became
// events, 242 before PodResources went quiet while nothing is held). Most of it is the reads of
// what cannot notify: the 32 ECC counters Trn1 can move (96) and the 8 EFA port states (24).
constexpr int64_t kCeilingPerSecond = 200;
constexpr int kSeconds = 10;

TEST(PluginIdleSyscallsTest, WithNothingHappeningItStaysWithinItsCeiling) {
  if (testing::kSanitized) {
    GTEST_SKIP() << "syscall counts are checked in builds without a sanitizer";
  }
  testing::TempDir work("plugin_idle");
  testing::SimNode node({.sim_bin = NEURON_SIM_BIN,
                         .root = work.path() / "root",
                         .logs = work.path() / "logs",
                         .empty_proc = true});
  ASSERT_TRUE(node.Up("trn1.32xlarge")) << node.Log();
  const fs::path kdir = work.path() / "kubelet";
  absl::StatusOr<std::unique_ptr<sim::KubeletEmulator>> kubelet = sim::KubeletEmulator::Start(
      {.kubelet_dir = kdir.string(), .root = node.root().string(), .rpc_deadline = 30s});
  ASSERT_TRUE(kubelet.ok()) << kubelet.status();
  const fs::path err = work.path() / "plugin.err";
  const pid_t pid =
      testing::Spawn(node.UnderDriver({NEURON_PLUGIN_BIN, "--root", node.root().string(),
                                       "--kubelet-dir", kdir.string(), "--listen", "127.0.0.1:0"}),
                     work.path() / "plugin.out", err);
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        for (const char* r :
             {"aws.amazon.com/neuron", "aws.amazon.com/neuroncore", "vpc.amazonaws.com/efa"}) {
          const std::optional<sim::ResourceState> s = (*kubelet)->Resource(r);
          if (!s || !s->connected) return false;
        }
        return true;
      },
      60s))
      << testing::ReadFile(err);
  testing::ExpectIdleSyscallsWithin(work.path(), pid, "neuron-device-plugin idle on trn1.32xlarge",
                                    kCeilingPerSecond, kSeconds);
}

}  // namespace
}  // namespace neuron
