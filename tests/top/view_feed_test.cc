// neuron-top's ViewFeed against simulated trees: views from real samples (live datastores from
// FakeDatastores; live_test.cc reads them through the simulated driver), the cost policy (hot
// samples unless memory moved or detail is wanted), pods from cgroups, what a missing live
// source and root-only files turn into, and the collection thread publishing views to the
// drawing side.

#include "top/view_feed.h"

#include <errno.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include "core/driver/datastore_layout.h"
#include "tests/support/fake_datastores.h"
#include "tests/support/temp_dir.h"
#include "tests/top/top_test_util.h"

namespace neuron::top {
namespace {

namespace fs = std::filesystem;
using ::neuron::testing::ReadFile;
using ::neuron::testing::Spawn;
using ::neuron::testing::Stop;
using ::neuron::testing::WaitUntil;
using ::neuron::top::testing::AddFakeProcess;
using ::neuron::top::testing::MakeTree;
using ::neuron::top::testing::WriteProcStat;
using ::testing::HasSubstr;

class ViewFeedTest : public ::testing::Test {
 protected:
  void Start(std::string_view instance, ViewFeedOptions options = {}) {
    tree_ = MakeTree(tmp_.path(), instance);
    Init(std::move(options));
  }
  void Init(ViewFeedOptions options = {}) {
    options.node.root = tmp_.path();
    feed_ = std::make_unique<ViewFeed>(options,
                                       MakeCgroupPodLocator(ProcReader(RootPaths(tmp_.path()))),
                                       datastores_->Reader(), datastores_->Records());
    const absl::Status s = feed_->Init();
    ASSERT_TRUE(s.ok()) << s;
  }
  void TearDown() override { feed_.reset(); }

  ::neuron::testing::TempDir tmp_{"view_feed"};
  std::shared_ptr<::neuron::testing::FakeDatastores> datastores_ =
      ::neuron::testing::FakeDatastores::Make();
  std::unique_ptr<sim::SimTree> tree_;
  std::unique_ptr<ViewFeed> feed_;
};

TEST_F(ViewFeedTest, RuntimeAppearsWithUtilizationAndCommand) {
  Start("trn1.32xlarge");
  std::shared_ptr<const TopView> v = feed_->Latest();
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->runtime_attached, false);
  EXPECT_EQ(v->instance_type, "trn1.32xlarge");
  EXPECT_EQ(v->apps[0].grid.size(), 16u);

  // This test process plays the runtime: device 3, core slot 1 busy far more than the window.
  sim::DatastoreWriter& w = datastores_->Add(3, ::getpid());
  datastores_->SetRecords(3, ::getpid()).process.long_tag = "tagged-job";
  v = feed_->Step();
  EXPECT_EQ(v->runtime_attached, true);
  ASSERT_EQ(v->processes.size(), 1u);
  EXPECT_EQ(v->processes[0].pid, ::getpid());
  EXPECT_THAT(v->processes[0].command, HasSubstr(program_invocation_short_name));
  EXPECT_TRUE(v->processes[0].pod_known);
  // In a pod exactly when this test runs in one.
  EXPECT_EQ(v->processes[0].pod.has_value(),
            ParsePodFromCgroup(ReadFile("/proc/self/cgroup")).has_value());
  ASSERT_EQ(v->apps.size(), 2u);
  EXPECT_EQ(v->apps[1].label, "tagged-job");

  ASSERT_TRUE(w.AddCoreCounter(1, nds::kTimeInUse, 3600ull * 1000000).ok());
  v = feed_->Step();
  const DeviceRow& d3 = v->apps[0].grid[3];
  EXPECT_EQ(d3.cores[1].core_id, 7);
  EXPECT_EQ(d3.cores[1].utilization, 1.0);  // clamped: the busy total outran the window
  EXPECT_EQ(d3.cores[0].utilization, 0.0);
  EXPECT_EQ(v->processes[0].core_ids, (std::vector<int>{7}));
  ASSERT_FALSE(v->history.utilization.empty());
  EXPECT_TRUE(v->history.utilization.back().has_value());
  datastores_->Remove(3, ::getpid());
  v = feed_->Step();
  EXPECT_EQ(v->runtime_attached, false);
}

// docs/architecture.md#unknown-is-not-zero: while the live source cannot be read, utilization and
// the process list are unknown (absent), not zero, and the view carries the reason; they return
// with the source.
TEST_F(ViewFeedTest, LiveSourceDownMeansUnknownNotIdle) {
  datastores_->SetState({true, false, "/x/dev/neuron0: no Neuron driver answers its ioctls"});
  Start("inf2.24xlarge");
  std::shared_ptr<const TopView> v = feed_->Step();
  EXPECT_FALSE(v->runtime_attached.has_value());
  EXPECT_EQ(LiveDataProblem(v->datastore_source),
            "/x/dev/neuron0: no Neuron driver answers its ioctls");
  for (const DeviceRow& d : v->apps[0].grid) {
    for (const CoreCell& c : d.cores) EXPECT_FALSE(c.utilization.has_value());
  }
  EXPECT_FALSE(v->apps[0].average_utilization.has_value());
  datastores_->SetState({true, true, ""});
  feed_->Step();
  v = feed_->Step();
  EXPECT_EQ(v->runtime_attached, false);
  EXPECT_EQ(v->apps[0].grid[0].cores[0].utilization, 0.0);
}

// top/format.h: a runtime whose argv holds ESC[2J (clear the screen) and a C1 CSI, and whose tag
// holds an OSC title sequence, shows none of them raw, in the view the screen paints and in the
// --snapshot JSON alike.
TEST_F(ViewFeedTest, AWorkloadsTextCannotWriteToTheTerminal) {
  Start("trn1.2xlarge");
  // bash keeps its arguments in its own command line while it waits for sleep (the "; :" keeps
  // it from exec'ing sleep in its place).
  // C++ would read "\x9b31m" as one escape: the bytes after one are added separately.
  const std::string c1 = std::string("\xc2\x9b") + "31m";
  const std::string raw = std::string("\x9b") + "1m";
  const pid_t child =
      Spawn({"bash", "-c", "sleep 60; :", "\x1b[2J", c1, raw}, tmp_.path() / "child.out", "");
  ASSERT_GT(child, 0);
  const std::string cmdline = "/proc/" + std::to_string(child) + "/cmdline";
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(cmdline).find("sleep 60") != std::string::npos; },
                        std::chrono::seconds(10)));
  datastores_->Add(0, child);
  datastores_->SetRecords(0, child).process.tag = "\x1b]0;owned\x07";
  const std::shared_ptr<const TopView> v = feed_->Step();
  Stop(child, std::chrono::seconds(10));
  ASSERT_EQ(v->processes.size(), 1u);
  EXPECT_EQ(v->processes[0].command,
            "bash -c sleep 60; : \\x1b[2J \\x9b31m \xef\xbf\xbd" + std::string("1m"));
  ASSERT_EQ(v->apps.size(), 2u);
  // libnrt's reader makes tags printable ASCII (core/sample/runtime_records.cc); the view does
  // not count on it.
  EXPECT_EQ(v->apps[1].label, "\\x1b]0;owned\\x07");
  const std::string json = ViewToJson(*v);
  EXPECT_THAT(json, HasSubstr("\\\\x1b[2J"));  // the JSON string holds the backslash
  for (const std::string_view raw : {"\x1b", "\x9b", "\x07"}) {
    EXPECT_EQ(json.find(raw), std::string::npos) << "raw control byte in the JSON";
  }
}

TEST_F(ViewFeedTest, FullSweepOnlyWhenMemoryMoves) {
  ViewFeedOptions options;
  options.full_sweep_min_gap = std::chrono::hours(1);  // the summary alone never asks for one
  Start("trn1.32xlarge", options);
  EXPECT_EQ(feed_->full_samples(), 1u);  // the first sample reads everything
  feed_->Step();
  feed_->Step();
  EXPECT_EQ(feed_->full_samples(), 1u);
  EXPECT_EQ(feed_->hot_samples(), 2u);
  feed_->SetDetailWanted(true);  // per-core categories on screen, but nothing moved
  feed_->Step();
  EXPECT_EQ(feed_->full_samples(), 1u);

  // An allocation: the hot set sees the total move; with detail on screen the next sample
  // refreshes the categories.
  const fs::path core = tree_->CoreDir(2, 0);
  auto allocate = [&] {
    ASSERT_TRUE(
        tree_->ApplyCounter(core / "stats/memory_usage/device_mem", sim::CounterOp::kInc, 1 << 20)
            .ok());
    ASSERT_TRUE(
        tree_->ApplyCounter(tree_->DeviceMemDir(2, 0, "tensors"), sim::CounterOp::kInc, 1 << 20)
            .ok());
  };
  allocate();
  std::shared_ptr<const TopView> v = feed_->Step();  // hot: sees the total move
  EXPECT_EQ(v->apps[0].device.total, 1u << 20);
  EXPECT_EQ(v->apps[0].device.categories[kTensors], 0u);
  v = feed_->Step();  // full: categories
  EXPECT_EQ(feed_->full_samples(), 2u);
  EXPECT_EQ(v->apps[0].device.categories[kTensors], 1u << 20);
  feed_->Step();
  EXPECT_EQ(feed_->full_samples(), 2u);

  // Without detail on screen, the minimum gap holds the full sweep back.
  feed_->SetDetailWanted(false);
  allocate();
  feed_->Step();
  v = feed_->Step();
  EXPECT_EQ(feed_->full_samples(), 2u);
  EXPECT_EQ(v->apps[0].device.total, 2u << 20);
  EXPECT_EQ(v->apps[0].device.categories[kTensors], 1u << 20);  // stale until the gap passes
}

TEST_F(ViewFeedTest, MemoryMoveTriggersFullSweepAfterTheGap) {
  ViewFeedOptions options;
  options.full_sweep_min_gap = std::chrono::milliseconds(0);
  Start("inf2.24xlarge", options);
  feed_->Step();
  EXPECT_EQ(feed_->full_samples(), 1u);
  ASSERT_TRUE(tree_
                  ->ApplyCounter(tree_->CoreDir(1, 1) / "stats/memory_usage/device_mem",
                                 sim::CounterOp::kInc, 4096)
                  .ok());
  feed_->Step();
  feed_->Step();
  EXPECT_EQ(feed_->full_samples(), 2u);
}

TEST_F(ViewFeedTest, PodFromCgroupInRootProc) {
  tree_ = MakeTree(tmp_.path(), "inf2.24xlarge");
  AddFakeProcess(tmp_.path(), {4242,
                               {"python3", "infer.py"},
                               {},
                               "0::/kubepods.slice/kubepods-burstable.slice/"
                               "kubepods-burstable-pod0a1b2c3d_4e5f_6a7b_8c9d_0e1f2a3b4c5d.slice/"
                               "cri-containerd-0123456789abcdef.scope\n"});
  WriteProcStat(tmp_.path(), 100, 100, 800, 96);
  datastores_->Add(1, 4242);
  Init();
  const std::shared_ptr<const TopView> v = feed_->Latest();
  ASSERT_EQ(v->processes.size(), 1u);
  EXPECT_EQ(v->processes[0].command, "python3 infer.py");
  ASSERT_TRUE(v->processes[0].pod.has_value());
  EXPECT_EQ(v->processes[0].pod->uid, "0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d");
  EXPECT_EQ(v->processes[0].pod->qos, "burstable");
}

TEST_F(ViewFeedTest, ThreadPublishesViewsAndSignalsTheDrawingSide) {
  ViewFeedOptions options;
  options.delay = std::chrono::milliseconds(100);
  options.first_delay = std::chrono::milliseconds(50);
  Start("inf2.24xlarge", options);
  const uint64_t first = feed_->Latest()->generation;
  uint64_t drained = 0;
  while (::read(feed_->notify_fd(), &drained, sizeof(drained)) > 0) {
  }
  feed_->Start();
  pollfd p{feed_->notify_fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 20000), 1) << "no view published within 20 s";
  EXPECT_TRUE(WaitUntil([&] { return feed_->Latest()->generation >= first + 3; },
                        std::chrono::seconds(20)));
  feed_->Stop();
  const uint64_t stopped = feed_->Latest()->generation;
  // Stopped: the owner's own Step() is the only publisher left, so the next view is exactly
  // one generation on and the eventfd counts exactly that one publication.
  while (::read(feed_->notify_fd(), &drained, sizeof(drained)) > 0) {
  }
  const std::shared_ptr<const TopView> stepped = feed_->Step();
  EXPECT_EQ(stepped->generation, stopped + 1);
  EXPECT_EQ(feed_->Latest()->generation, stopped + 1);
  uint64_t signals = 0;
  ASSERT_EQ(::read(feed_->notify_fd(), &signals, sizeof(signals)),
            static_cast<ssize_t>(sizeof(signals)));
  EXPECT_EQ(signals, 1u);
}

}  // namespace
}  // namespace neuron::top
