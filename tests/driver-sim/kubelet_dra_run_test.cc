// `neuron-sim pod run --claim` through the real binaries: `neuron-sim kubelet --cdi-dir` as its
// own process, a DRA plugin double in the test process (kubelet_dra_fixture.h), and the pod's
// command run under the simulated driver, which sees the claim's CDI edits: its environment and
// the device map of its device nodes. The claim is unprepared once the command ended.
#include "tests/driver-sim/kubelet_dra_fixture.h"
#include "tests/driver-sim/kubelet_emulator_fixture.h"
#include "tests/support/sim_node.h"

namespace neuron::sim::kubelet_test {
namespace {

class PodRunClaimTest : public KubeletEmulatorTest {
 protected:
  void SetUp() override {
    KubeletEmulatorTest::SetUp();
    fs::create_directories(logs_);
    ASSERT_TRUE(sim_.Up("inf2.24xlarge")) << sim_.Log();
    plugin_.state.devices["uid-1"] = {"neuron-2", "neuron-3"};
    plugin_.state.env = {{"NEURON_RT_VISIBLE_CORES", "4-7"}};
    plugin_.Serve();
    kubelet_ = neuron::testing::Spawn({NEURON_SIM_BIN, "kubelet", "--root", node_.str(),
                                       "--kubelet-dir", dir_.str(), "--cdi-dir", cdi_.str()},
                                      logs_ / "kubelet.out", logs_ / "kubelet.err");
    ASSERT_GT(kubelet_, 0);
    ASSERT_TRUE(WaitUntil([&] { return !plugin_.Statuses().empty(); }, 20s)) << Log("kubelet.err");
    ASSERT_TRUE(plugin_.Statuses()[0].plugin_registered()) << plugin_.Statuses()[0].error();
  }
  void TearDown() override {
    if (kubelet_ > 0) {
      EXPECT_EQ(neuron::testing::Stop(kubelet_, 20s), 0) << Log("kubelet.err");
    }
  }
  std::optional<int> Run(std::vector<std::string> args, const std::string& tag) {
    args.insert(args.begin(), NEURON_SIM_BIN);
    return neuron::testing::WaitExit(
        neuron::testing::Spawn(args, logs_ / (tag + ".out"), logs_ / (tag + ".err")), 30s);
  }
  std::string Log(const std::string& name) const { return neuron::testing::ReadFile(logs_ / name); }

  fs::path logs_ = dir_.path() / "logs";
  TempDir node_{"node"};
  TempDir cdi_{"cdi"};
  neuron::testing::SimNode sim_{{.sim_bin = NEURON_SIM_BIN,
                                 .root = node_.path(),
                                 .logs = logs_,
                                 .on_stop = neuron::testing::ExpectCleanExit}};
  FakeDraPlugin plugin_{dir_.path(), cdi_.path()};
  pid_t kubelet_ = -1;
};

TEST_F(PodRunClaimTest, TheCommandSeesTheClaimsCdiEditsAndTheClaimIsReleasedAfter) {
  const std::string script =
      "echo cores=$NEURON_RT_VISIBLE_CORES map=$NEURON_SIM_DEVICE_MAP root=$NEURON_ROOT; "
      "test -e $NEURON_ROOT/dev/neuron3 && echo node3; exit 3";
  EXPECT_EQ(Run({"pod", "run", "--kubelet-dir", dir_.str(), "--namespace", "training", "--name",
                 "job", "--claim", "training/llama-neurons:uid-1", "--", "sh", "-c", script},
                "run"),
            3)
      << Log("run.err") << Log("kubelet.err");
  EXPECT_THAT(Log("run.out"), HasSubstr("cores=4-7 map=2=2,3=3 root=" + node_.str()));
  EXPECT_THAT(Log("run.out"), HasSubstr("node3"));
  std::lock_guard lock(plugin_.state.mu);
  EXPECT_THAT(plugin_.state.prepared, ElementsAre("uid-1"));
  EXPECT_THAT(plugin_.state.unprepared, ElementsAre("uid-1"));
}

TEST_F(PodRunClaimTest, APrepareErrorExitsOneWithTheDriversMessageAndBadClaimsAreUsage) {
  {
    std::lock_guard lock(plugin_.state.mu);
    plugin_.state.errors["uid-1"] = "no such device";
  }
  EXPECT_EQ(Run({"pod", "run", "--kubelet-dir", dir_.str(), "--name", "job", "--claim",
                 "default/c:uid-1", "--", "true"},
                "fail"),
            1);
  EXPECT_THAT(Log("fail.err"),
              HasSubstr("NodePrepareResources failed for ResourceClaim c: no such device"));
  EXPECT_EQ(Run({"pod", "run", "--kubelet-dir", dir_.str(), "--name", "job", "--claim", "c:uid"},
                "usage"),
            2);
  EXPECT_THAT(Log("usage.err"), HasSubstr("expected NAMESPACE/NAME:UID"));
}

}  // namespace
}  // namespace neuron::sim::kubelet_test
