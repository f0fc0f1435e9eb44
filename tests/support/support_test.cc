// The shared test helpers themselves: processes (start, run, stop), trees built from an instance
// name and read back by discovery, and a running simulated node whose readiness wait ends as
// soon as its daemon has exited. Against the real neuron-sim binary.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>

#include "core/model/catalog.h"
#include "tests/support/process.h"
#include "tests/support/sim_node.h"
#include "tests/support/sim_testing.h"
#include "tests/support/sim_tree_fixture.h"
#include "tests/support/temp_dir.h"

namespace neuron::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

TEST(Subprocess, RunCommandCapturesOutputAndExitCode) {
  TempDir dir("support");
  const RunResult r = RunCommand(dir.path(), {"sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(r.code, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_TRUE(fs::is_empty(dir.path())) << "the capture files stay behind";
}

TEST(Subprocess, AMissingProgramSaysWhyAndAFailedStartIsNeverSignalled) {
  TempDir dir("support");
  std::string error;
  EXPECT_EQ(StartProcess({(dir.path() / "absent").string()}, "", "", {}, &error), -1);
  EXPECT_THAT(error, HasSubstr("absent"));
  const RunResult r = RunCommand(dir.path(), {(dir.path() / "absent").string()});
  EXPECT_EQ(r.code, -1);
  EXPECT_THAT(r.err, HasSubstr("absent"));
  // kill(-1) would signal every process we may signal, this test's runner included.
  EXPECT_EQ(Stop(-1, 1s), std::nullopt);
  EXPECT_EQ(WaitExit(-1, 1s), std::nullopt);
}

TEST(Subprocess, StopReportsTheExitCodeOrThatItNeededSigkill) {
  const pid_t polite = StartProcess({"sleep", "30"}, "", "");
  ASSERT_GT(polite, 0);
  EXPECT_EQ(Stop(polite, 10s), 128 + SIGTERM);
  // SIGTERM ignored, which exec keeps; it says so once the trap is set.
  TempDir dir("support");
  const fs::path out = dir.path() / "out";
  const pid_t stubborn =
      StartProcess({"sh", "-c", "trap '' TERM; echo set; exec sleep 30"}, out, "");
  ASSERT_GT(stubborn, 0);
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(out) == "set\n"; }, 30s));
  EXPECT_EQ(Stop(stubborn, 300ms), std::nullopt);
  EXPECT_EQ(WaitExit(stubborn, 0ms), std::nullopt) << "reaped by Stop";
}

TEST(SimTreeFixture, BuildsTheInstanceAndDiscoveryReadsItBack) {
  TempDir dir("support");
  // trn2 runs LNC 2 by default; 1 is the other setting it supports.
  absl::StatusOr<std::unique_ptr<sim::SimTree>> tree =
      BuildSimTree(dir.path() / "root", "trn2.48xlarge", {.lnc = 1, .instance_id = "i-01234567"});
  ASSERT_TRUE(tree.ok()) << tree.status();
  EXPECT_EQ((*tree)->config().lnc, 1);
  absl::StatusOr<Inventory> inv = ScanSimTree(**tree, 1);
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->instance_type, "trn2.48xlarge");
  EXPECT_EQ(inv->instance_id, "i-01234567");  // the 8-digit form of older instances
  EXPECT_EQ(inv->lnc, 1);
  ASSERT_EQ(inv->devices.size(), 16u);
  const InstanceSpec& spec = **FindInstance("trn2.48xlarge");
  EXPECT_EQ(inv->devices[5].bdf, spec.placement[5].bdf);  // the resolver the driver stands for
}

TEST(SimTreeFixture, RefusesUnknownInstancesAndUnsupportedLnc) {
  TempDir dir("support");
  EXPECT_EQ(BuildSimTree(dir.path(), "p4d.24xlarge").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(BuildSimTree(dir.path(), "inf2.xlarge", {.lnc = 3}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

// The node this suite runs: inf2.xlarge, the smallest, with its output in `dir`.
SimNodeOptions Options(
    const TempDir& dir,
    std::function<void(std::optional<int>, const std::string&)> on_stop = ExpectCleanExit) {
  return {.sim_bin = NEURON_SIM_BIN,
          .root = dir.path() / "root",
          .logs = dir.path() / "logs",
          .on_stop = std::move(on_stop)};
}

TEST(SimNode, RunsAWorkloadAndCtlAndStopsEverythingCleanly) {
  TempDir dir("support");
  int stops = 0;
  {
    SimNode node(Options(dir, [&](std::optional<int> code, const std::string& log) {
      ++stops;
      EXPECT_EQ(code, 0) << log;
    }));
    ASSERT_TRUE(node.Up("inf2.xlarge")) << node.Log();
    EXPECT_TRUE(fs::exists(node.Device(0) / "reset"));
    const pid_t workload = node.StartWorkload("0");
    ASSERT_GT(workload, 0) << ReadFile(node.logs() / "run.0.out.err");
    const RunResult status = node.Ctl({"status"});
    EXPECT_EQ(status.code, 0) << status.err;
    EXPECT_THAT(status.out, HasSubstr(std::to_string(workload)));
    const RunResult under = RunCommand(dir.path(), node.UnderDriver({"true"}));
    EXPECT_EQ(under.code, 0) << under.err;
    const pid_t sleeper = node.StartUnderDriver({"sleep", "600"}, "sleeper");
    ASSERT_GT(sleeper, 0);
    EXPECT_EQ(node.Poll(), std::nullopt) << "the daemon is running";
    EXPECT_EQ(node.Stop(), 0);
    // Stopped and reaped, so gone.
    EXPECT_EQ(::kill(workload, 0), -1) << "the workload outlived the node";
    EXPECT_EQ(::kill(sleeper, 0), -1) << "a program under the driver outlived the node";
    EXPECT_EQ(node.Stop(), 0) << "a second Stop returns the same";
  }
  EXPECT_EQ(stops, 1);
}

// A daemon that cannot start (here: ROOT so deep that its control socket's path is longer than
// the 107 bytes a Unix socket takes) exits at once, and Up() says so without waiting out the
// ceiling.
TEST(SimNode, UpReturnsAsSoonAsTheDaemonHasExited) {
  TempDir dir("support");
  SimNodeOptions options = Options(dir, {});
  options.root = dir.path() / std::string(120, 'r');
  SimNode node(options);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(node.Up("inf2.xlarge"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 60s);
  EXPECT_FALSE(node.ready());
  EXPECT_EQ(node.Poll(), 1);
  EXPECT_THAT(node.Log(), HasSubstr("exited with code 1"));
  EXPECT_THAT(node.Log(), HasSubstr("too long"));
  EXPECT_EQ(node.Stop(), 1);
}

}  // namespace
}  // namespace neuron::testing
