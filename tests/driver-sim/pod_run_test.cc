// `neuron-sim kubelet` and `neuron-sim pod run -- CMD` through the real binary: the pod's
// environment and devices, and stopping pods as a kubelet does (SIGTERM to the group, the grace
// period, SIGKILL, IDs freed only when the processes are gone), with the emulator in-process.
#include <signal.h>

#include <sstream>
#include <utility>

#include "tests/driver-sim/kubelet_emulator_fixture.h"
#include "tests/support/sim_node.h"

namespace neuron::sim::kubelet_test {
namespace {

// ---- the real binary -------------------------------------------------------------------------

// A running simulated inf2.24xlarge (pod run runs CMD under its driver, `neuron-sim exec`) and a
// logs directory, for the fixtures below.
class SimNodeKubeletTest : public KubeletEmulatorTest {
 protected:
  void SetUp() override {
    KubeletEmulatorTest::SetUp();
    fs::create_directories(logs_);
    ASSERT_TRUE(sim_.Up("inf2.24xlarge")) << sim_.Log();
  }

  fs::path logs_ = dir_.path() / "logs";
  TempDir node_{"node"};
  neuron::testing::SimNode sim_{{.sim_bin = NEURON_SIM_BIN,
                                 .root = node_.path(),
                                 .logs = logs_,
                                 .on_stop = neuron::testing::ExpectCleanExit}};
};

// A node whose devices 2 and 3 back the plugin's answers (pod run runs CMD under the simulated
// driver, `neuron-sim exec`, which needs a running node), `neuron-sim kubelet` as its own
// process, and a plugin with cores 0..3 registered with it.
class PodRunBinaryTest : public SimNodeKubeletTest {
 protected:
  void SetUp() override {
    SimNodeKubeletTest::SetUp();
    if (HasFatalFailure()) return;
    kubelet_ = neuron::testing::Spawn(
        {NEURON_SIM_BIN, "kubelet", "--root", node_.str(), "--kubelet-dir", dir_.str()},
        logs_ / "kubelet.out", logs_ / "kubelet.err");
    ASSERT_GT(kubelet_, 0);
    ASSERT_TRUE(WaitUntil([&] { return IsSocket(dir_.path() / "neuron-sim-kubelet.sock"); }, 20s))
        << Log("kubelet.err");
    plugin_.gpa_answer = {"2", "3"};
    plugin_.Serve();
    ASSERT_TRUE(plugin_.Register("aws.amazon.com/neuroncore").ok());
    std::optional<int> code;
    ASSERT_TRUE(WaitUntil(
        [&] {
          code = Run({"kubelet", "status", "--kubelet-dir", dir_.str()}, "st");
          return Log("st.out").find("capacity=4") != std::string::npos;
        },
        20s));
    EXPECT_EQ(code, 0);
  }
  void TearDown() override {
    if (kubelet_ > 0) {
      EXPECT_EQ(neuron::testing::Stop(kubelet_, 20s), 0) << Log("kubelet.err");
    }
  }

  // Starts `neuron-sim ARGS...`; its output in logs/TAG.out and .err.
  pid_t Start(std::vector<std::string> args, const std::string& tag) {
    args.insert(args.begin(), NEURON_SIM_BIN);
    return neuron::testing::Spawn(args, logs_ / (tag + ".out"), logs_ / (tag + ".err"));
  }
  // Runs `neuron-sim ARGS...` to its end: its exit status.
  std::optional<int> Run(std::vector<std::string> args, const std::string& tag) {
    return neuron::testing::WaitExit(Start(std::move(args), tag), 30s);
  }
  // `neuron-sim pod run` of pod NAME asking for COUNT cores, then the words of TAIL.
  std::vector<std::string> PodRun(const std::string& name, int count,
                                  std::vector<std::string> tail = {}) {
    std::vector<std::string> args{
        "pod",    "run", "--kubelet-dir", dir_.str(),
        "--name", name,  "--request",     "aws.amazon.com/neuroncore=" + std::to_string(count)};
    args.insert(args.end(), tail.begin(), tail.end());
    return args;
  }
  std::string PodList(const std::string& tag) {
    EXPECT_EQ(Run({"pod", "list", "--kubelet-dir", dir_.str()}, tag), 0) << Log(tag + ".err");
    return Log(tag + ".out");
  }
  std::string Log(const std::string& name) const { return neuron::testing::ReadFile(logs_ / name); }

  pid_t kubelet_ = -1;
  TestPlugin plugin_{PluginDir(), "cores.sock", {"0", "1", "2", "3"}};
};

TEST_F(PodRunBinaryTest, RunsTheCommandUnderTheDriverWithThePodsEnvironment) {
  // CMD runs under the simulated driver (`neuron-sim exec`: its interposer is preloaded).
  EXPECT_EQ(Run(PodRun("job", 2,
                       {"--", "sh", "-c",
                        "echo cores=$NEURON_RT_VISIBLE_CORES root=$NEURON_ROOT "
                        "map=$NEURON_SIM_DEVICE_MAP preload=$LD_PRELOAD; exit 7"}),
                "run"),
            7)
      << Log("run.err");
  const std::string job_out = Log("run.out");
  EXPECT_THAT(job_out, HasSubstr("cores=2,3 root=" + node_.str() + " map=2=2,3=3 preload="));
  EXPECT_THAT(job_out, ::testing::ContainsRegex("preload=[^ ]*\\.so"))
      << "not run through neuron-sim exec";
  EXPECT_THAT(Log("run.err"), HasSubstr("aws.amazon.com/neuroncore 2 3"));
  EXPECT_THAT(Log("run.err"), HasSubstr("NEURON_SIM_DEVICE_MAP=2=2,3=3"));
  EXPECT_EQ(PodList("ls"), "");  // deleted after CMD
}

TEST_F(PodRunBinaryTest, SigtermReachesTheCommandAndThePodIsDeletedAfter) {
  const pid_t pid =
      Start(PodRun("long", 1,
                   {"--", "sh", "-c", "trap 'exit 3' TERM; echo up; while :; do sleep 0.1; done"}),
            "long");
  ASSERT_TRUE(WaitUntil([&] { return Log("long.out").find("up") != std::string::npos; }, 20s));
  kill(pid, SIGTERM);
  EXPECT_EQ(neuron::testing::WaitExit(pid, 20s), 3);
  EXPECT_EQ(PodList("ls"), "");
}

TEST_F(PodRunBinaryTest, ACommandThatCannotRunExits127AsAShellSays) {
  EXPECT_EQ(Run(PodRun("absent", 1, {"--", (dir_.path() / "no-such-command").string()}), "absent"),
            127)
      << Log("absent.err");
  EXPECT_EQ(PodList("ls"), "");
}

TEST_F(PodRunBinaryTest, WithoutACommandThePodStaysUntilPodDelete) {
  EXPECT_EQ(Run(PodRun("stay", 1), "stay"), 0) << Log("stay.err");
  EXPECT_THAT(PodList("ls"), HasSubstr("default/stay main aws.amazon.com/neuroncore"));
  EXPECT_EQ(Run({"pod", "delete", "--kubelet-dir", dir_.str(), "--name", "stay"}, "del"), 0);
  EXPECT_EQ(PodList("ls2"), "");
  EXPECT_EQ(Run({"pod", "delete", "--kubelet-dir", dir_.str(), "--name", "stay"}, "del2"), 1);
}

TEST_F(PodRunBinaryTest, AnAdmissionErrorExitsOneWithTheKubeletsReasonAndBadUsageTwo) {
  EXPECT_EQ(Run(PodRun("huge", 9), "huge"), 1);
  EXPECT_THAT(Log("huge.err"), HasSubstr("Insufficient aws.amazon.com/neuroncore"));
  EXPECT_EQ(Run({"pod", "run", "--kubelet-dir", dir_.str(), "--name", "x", "--request", "nonsense"},
                "usage"),
            2);
  EXPECT_EQ(PodList("ls"), "");
}

TEST_F(PodRunBinaryTest, RestartDropsThePluginsAndStopRemovesTheSockets) {
  EXPECT_EQ(Run({"kubelet", "restart", "--kubelet-dir", dir_.str()}, "rs"), 0);
  EXPECT_FALSE(fs::exists(PluginDir() / "cores.sock"));
  EXPECT_EQ(neuron::testing::Stop(std::exchange(kubelet_, -1), 20s), 0);
  EXPECT_FALSE(fs::exists(PluginDir() / "kubelet.sock"));
  EXPECT_FALSE(fs::exists(dir_.path() / "neuron-sim-kubelet.sock"));
}

// ---- stopping pods (`pod run` and `pod delete` through the binary, the emulator in-process) -----

// A node, this emulator serving its control socket, and a plugin with devices 0..3, for
// `neuron-sim pod run -- CMD` under the simulated driver. Holdings are read from the emulator.
class PodStopTest : public SimNodeKubeletTest {
 protected:
  void SetUp() override {
    SimNodeKubeletTest::SetUp();
    if (HasFatalFailure()) return;
    KubeletEmulator::Options o = Opts();
    o.root = node_.str();
    k_ = Start(o);
    ASSERT_NE(k_, nullptr);
    plugin_ = Plugin(*k_);
  }
  // Starts `neuron-sim pod run` for pod NAME with CMD; its output in logs/NAME.out and .err.
  pid_t PodRun(const std::string& name, const std::string& grace, const std::string& script) {
    return neuron::testing::Spawn({NEURON_SIM_BIN, "pod", "run", "--kubelet-dir", dir_.str(),
                                   "--name", name, "--grace-period", grace, "--request",
                                   std::string(kResource) + "=1", "--", "sh", "-c", script},
                                  logs_ / (name + ".out"), logs_ / (name + ".err"));
  }
  pid_t PodDelete(const std::string& name, const std::string& grace) {
    return neuron::testing::Spawn({NEURON_SIM_BIN, "pod", "delete", "--kubelet-dir", dir_.str(),
                                   "--name", name, "--grace-period", grace},
                                  logs_ / (name + ".del.out"), logs_ / (name + ".del.err"));
  }
  // The numbers CMD printed after "up" on its first line: its PID, then any child's.
  std::vector<pid_t> UpLine(const std::string& name) {
    std::vector<pid_t> pids;
    EXPECT_TRUE(WaitUntil(
        [&] {
          std::istringstream in(neuron::testing::ReadFile(logs_ / (name + ".out")));
          std::string word;
          if (!(in >> word) || word != "up") return false;
          for (pid_t p; in >> p;) pids.push_back(p);
          return !pids.empty();
        },
        30s))
        << neuron::testing::ReadFile(logs_ / (name + ".err"));
    return pids;
  }
  static bool Alive(pid_t pid) { return kill(pid, 0) == 0; }

  std::unique_ptr<KubeletEmulator> k_;
  std::unique_ptr<TestPlugin> plugin_;
};

TEST_F(PodStopTest, CommandIgnoringSigtermIsKilledAfterTheGracePeriodAndHoldsItsDevicesTillGone) {
  // `trap "" TERM` is inherited by the sleeps: the whole group ignores SIGTERM.
  const pid_t run =
      PodRun("stubborn", "3", "trap '' TERM; echo up $$; while :; do sleep 0.1; done");
  const std::vector<pid_t> up = UpLine("stubborn");
  ASSERT_EQ(up.size(), 1u);
  ASSERT_EQ(InUse(*k_), 1);
  const auto start = std::chrono::steady_clock::now();
  const pid_t del = PodDelete("stubborn", "2");
  // Until the delete returns: devices read as free imply the process is gone. In use is read
  // first, so that a process dying between the two reads cannot fake a violation.
  std::optional<int> del_code;
  int samples_alive = 0;
  while (!(del_code = neuron::testing::WaitExit(del, 50ms)) &&
         std::chrono::steady_clock::now() - start < 60s) {
    const int in_use = InUse(*k_);
    const bool alive = Alive(up[0]);
    EXPECT_FALSE(in_use == 0 && alive) << "devices freed while the command runs";
    if (alive) ++samples_alive;
  }
  EXPECT_EQ(del_code, 0) << neuron::testing::ReadFile(logs_ / "stubborn.del.err");
  // SIGKILL came after the 2 s grace period, not before: the command lived through it.
  EXPECT_GE(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_GT(samples_alive, 0);
  EXPECT_EQ(neuron::testing::WaitExit(run, 30s), 137)
      << neuron::testing::ReadFile(logs_ / "stubborn.err");
  EXPECT_FALSE(Alive(up[0]));
  EXPECT_EQ(InUse(*k_), 0);
  EXPECT_TRUE(k_->Pods().empty());
}

TEST_F(PodStopTest, DeleteStopsACommandThatHonoursSigtermAtOnceWithItsChildren) {
  // The grace period is far beyond the ceilings below: only SIGTERM can end this in time.
  const pid_t run = PodRun("polite", "600", "sleep 1000 & echo up $$ $!; wait");
  const std::vector<pid_t> up = UpLine("polite");
  ASSERT_EQ(up.size(), 2u);
  ASSERT_TRUE(Alive(up[1]));
  EXPECT_EQ(neuron::testing::WaitExit(PodDelete("polite", "600"), 60s), 0)
      << neuron::testing::ReadFile(logs_ / "polite.del.err");
  // The delete returned, so the group is gone: the shell and its child, and the devices free.
  EXPECT_FALSE(Alive(up[0]));
  EXPECT_FALSE(Alive(up[1]));
  EXPECT_EQ(InUse(*k_), 0);
  EXPECT_EQ(neuron::testing::WaitExit(run, 30s), 143)
      << neuron::testing::ReadFile(logs_ / "polite.err");
}

TEST_F(PodStopTest, SigtermToPodRunStopsTheGroupAndFreesThePod) {
  const pid_t run = PodRun("signalled", "600", "sleep 1000 & echo up $$ $!; wait");
  const std::vector<pid_t> up = UpLine("signalled");
  ASSERT_EQ(up.size(), 2u);
  ASSERT_EQ(InUse(*k_), 1);
  kill(run, SIGTERM);
  EXPECT_EQ(neuron::testing::WaitExit(run, 60s), 143)
      << neuron::testing::ReadFile(logs_ / "signalled.err");
  // pod run returns after its delete, which returns once the group is gone.
  EXPECT_FALSE(Alive(up[1]));
  EXPECT_EQ(InUse(*k_), 0);
  EXPECT_TRUE(k_->Pods().empty());
}

}  // namespace
}  // namespace neuron::sim::kubelet_test
