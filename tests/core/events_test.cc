// Events in directory mode against simulated trees. The rescan safety net is set to an hour in
// most tests, so a prompt add/remove can only come from the inotify watches.

#include "core/events/events.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/model/catalog.h"
#include "driver-sim/driver/sim_tree.h"
#include "tests/support/event_collector.h"
#include "tests/support/sim_testing.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

// docs/architecture.md#timing-in-tests: generous
constexpr auto kCeiling = std::chrono::seconds(5);

constexpr std::string_view kHwErrLine =
    "nrt: NEURON_HW_ERR=SRAM_UNCORRECTABLE_ERROR instance-id=i-0123456789abcdef0 "
    "hostname=ip-10-0-0-1 nd-id=3 nc-id=1 serial-num=19fcda00f5ff6eb9 action=TERMINATE_INSTANCE";

using TempRoot = ::neuron::testing::TempDir;

using Collector = ::neuron::testing::EventCollector;

auto Kind(EventKind k, int device) {
  return [=](const Event& e) { return e.kind == k && e.device == device; };
}
auto EfaKind(EventKind k, const std::string& name) {
  return [=](const Event& e) { return e.kind == k && e.efa == name; };
}

// Most tests write a device's `reset` file without the driver's record, so the states are
// rechecked at every poll here.
EventsOptions InotifyOnly() {
  EventsOptions o;
  o.mode = WatchMode::kDirectory;
  o.state_poll = milliseconds(50);
  o.device_state_recheck = milliseconds(50);
  o.rescan = std::chrono::hours(1);
  return o;
}

class EventsTest : public ::testing::Test {
 protected:
  void MakeTree(std::string_view instance) {
    tree_ = ::neuron::testing::MakeSimTree(root_.path(), instance, {.lnc = 1});
    ASSERT_NE(tree_, nullptr);
  }
  void StartEvents(const EventsOptions& options = InotifyOnly()) {
    events_ = std::make_unique<Events>(RootPaths(root_.path()), options);
    events_->Subscribe(got_.callback());
    ASSERT_TRUE(events_->Start().ok());
  }
  void TearDown() override {
    if (events_) events_->Stop();
  }

  TempRoot root_;
  std::unique_ptr<sim::SimTree> tree_;
  std::unique_ptr<Events> events_;
  Collector got_;
};

TEST_F(EventsTest, UnplugAndPlug) {
  MakeTree("inf2.24xlarge");
  StartEvents();
  ASSERT_TRUE(tree_->RemoveDevice(2).ok());
  EXPECT_TRUE(got_.WaitFor(Kind(EventKind::kDeviceRemoved, 2)));
  ASSERT_TRUE(tree_->AddDevice(2).ok());
  std::optional<Event> added = got_.WaitFor(Kind(EventKind::kDeviceAdded, 2));
  ASSERT_TRUE(added.has_value());
  EXPECT_EQ(added->state, DeviceState::kReady);
  // Nothing about devices that did not change.
  for (const Event& e : got_.Snapshot()) EXPECT_EQ(e.device, 2) << EventKindName(e.kind);
}

TEST_F(EventsTest, DeviceStateChanges) {
  MakeTree("inf2.24xlarge");
  StartEvents();
  ASSERT_TRUE(tree_->SetDeviceState(5, DeviceState::kReset).ok());
  std::optional<Event> reset = got_.WaitFor(Kind(EventKind::kDeviceStateChanged, 5));
  ASSERT_TRUE(reset.has_value());
  EXPECT_EQ(reset->state, DeviceState::kReset);
  ASSERT_TRUE(tree_->SetDeviceState(5, DeviceState::kInvalid).ok());
  EXPECT_TRUE(got_.WaitFor([](const Event& e) {
    return e.kind == EventKind::kDeviceStateChanged && e.device == 5 &&
           e.state == DeviceState::kInvalid;
  }));
}

// While the kernel log is read, a device reset is the driver's records of it, and a state
// written without one is not read before the recheck (the node's idle cost:
// bench/README.md#idle-cost).
TEST_F(EventsTest, WhileTheLogIsReadResetRecordsAreTheStateEvents) {
  MakeTree("inf2.24xlarge");
  EventsOptions o = InotifyOnly();
  o.device_state_recheck = std::chrono::hours(1);
  StartEvents(o);
  ASSERT_TRUE(tree_->SetDeviceState(1, DeviceState::kInvalid).ok());  // no record
  std::this_thread::sleep_for(milliseconds(300));                     // six state polls
  ASSERT_TRUE(tree_->SetDeviceState(5, DeviceState::kReset).ok());
  ASSERT_TRUE(tree_
                  ->AppendKmsg(6,
                               "neuron:nr_reset_thread_fn: nd5: initiating device reset "
                               "request 4294967295")
                  .ok());
  ASSERT_TRUE(tree_
                  ->AppendKmsg(6,
                               "neuron:nr_reset_thread_fn: nd5: initiating TPB reset "
                               "request 9")
                  .ok());  // a runtime's core reset: no state moves
  std::optional<Event> reset = got_.WaitFor(Kind(EventKind::kDeviceReset, 5));
  ASSERT_TRUE(reset.has_value());
  EXPECT_EQ(reset->reset, ResetStep::kInitiated);
  for (const Event& e : got_.Snapshot()) {
    EXPECT_EQ(e.kind, EventKind::kDeviceReset) << EventKindName(e.kind) << " " << e.device;
  }
  EXPECT_EQ(got_.Snapshot().size(), 1u);
}

// Without the kernel log nothing announces a reset: the states are read every state_poll.
TEST_F(EventsTest, WithoutTheLogStatesArePolled) {
  MakeTree("inf2.24xlarge");
  EventsOptions o = InotifyOnly();
  o.device_state_recheck = std::chrono::hours(1);
  o.watch_kmsg = false;
  StartEvents(o);
  ASSERT_TRUE(tree_->SetDeviceState(1, DeviceState::kInvalid).ok());
  std::optional<Event> changed = got_.WaitFor(Kind(EventKind::kDeviceStateChanged, 1));
  ASSERT_TRUE(changed.has_value());
  EXPECT_EQ(changed->state, DeviceState::kInvalid);
}

TEST_F(EventsTest, EfaRemovedAddedAndPortState) {
  MakeTree("trn1.32xlarge");
  StartEvents();
  ASSERT_TRUE(tree_->RemoveEfa("rdmap32s26").ok());
  EXPECT_TRUE(got_.WaitFor(EfaKind(EventKind::kEfaRemoved, "rdmap32s26")));
  ASSERT_TRUE(tree_->AddEfa("rdmap32s26").ok());
  std::optional<Event> added = got_.WaitFor(EfaKind(EventKind::kEfaAdded, "rdmap32s26"));
  ASSERT_TRUE(added.has_value());
  EXPECT_EQ(added->port_state, "ACTIVE");
  // The port state has no uevent; the poll sees it.
  ASSERT_TRUE(sim::WriteFileAtomic(root_.path() / "sys/class/infiniband/rdmap144s25/ports/1/state",
                                   "1: DOWN\n")
                  .ok());
  std::optional<Event> down = got_.WaitFor(EfaKind(EventKind::kEfaPortStateChanged, "rdmap144s25"));
  ASSERT_TRUE(down.has_value());
  EXPECT_EQ(down->port_state, "DOWN");
}

TEST_F(EventsTest, HardwareErrorFromKernelLog) {
  MakeTree("inf2.24xlarge");
  ASSERT_TRUE(tree_->AppendKmsg(3, "nrt: NEURON_HW_ERR=HBM_UNCORRECTABLE_ERROR nd-id=1 nc-id=0")
                  .ok());  // history: written before Start()
  StartEvents();
  ASSERT_TRUE(
      tree_->AppendKmsg(6, "neuron:nr_reset_thread_fn: nd3: reset request 1 completed").ok());
  ASSERT_TRUE(tree_->AppendKmsg(3, kHwErrLine).ok());
  std::optional<Event> hw = got_.WaitFor(Kind(EventKind::kHardwareError, 3));
  ASSERT_TRUE(hw.has_value());
  ASSERT_TRUE(hw->hw_error.has_value());
  EXPECT_EQ(hw->hw_error->type, "SRAM_UNCORRECTABLE_ERROR");
  EXPECT_EQ(hw->hw_error->nd_id, 3);
  EXPECT_EQ(hw->hw_error->nc_id, 1);
  EXPECT_EQ(hw->hw_error->serial_number, "19fcda00f5ff6eb9");
  EXPECT_EQ(hw->hw_error->action, "TERMINATE_INSTANCE");
  EXPECT_EQ(hw->hw_error->text, kHwErrLine);
  for (const Event& e : got_.Snapshot()) {
    EXPECT_NE(e.device, 1) << "a record from before Start() was reported";
    EXPECT_EQ(e.kind, EventKind::kHardwareError);
  }
}

TEST_F(EventsTest, MalformedKernelLogLineIsSkipped) {
  MakeTree("inf2.24xlarge");
  StartEvents();
  {
    std::ofstream kmsg(RootPaths(root_.path()).Kmsg(), std::ios::app);
    kmsg << "this is not a kmsg record\n";
    kmsg << "3,x,y,-;NEURON_HW_ERR=DMA_ERROR nd-id=0\n";  // bad header: skipped too
  }
  ASSERT_TRUE(tree_->AppendKmsg(3, "p NEURON_HW_ERR=DMA_ERROR nd-id=4 nc-id=1").ok());
  std::optional<Event> hw = got_.WaitFor(Kind(EventKind::kHardwareError, 4));
  ASSERT_TRUE(hw.has_value());
  EXPECT_EQ(hw->hw_error->type, "DMA_ERROR");
  for (const Event& e : got_.Snapshot()) EXPECT_NE(e.device, 0);
}

// The watched directories vanish (driver unloaded) and return (reloaded); the watches follow.
TEST_F(EventsTest, WatchesFollowDirectoriesThatVanishAndReturn) {
  StartEvents();  // an empty root: nothing to watch yet but the root itself
  MakeTree("inf2.24xlarge");
  for (int d = 0; d < 6; ++d) {
    EXPECT_TRUE(got_.WaitFor(Kind(EventKind::kDeviceAdded, d))) << "device " << d;
  }
  ASSERT_TRUE(tree_->Destroy().ok());
  for (int d = 0; d < 6; ++d) {
    EXPECT_TRUE(got_.WaitFor(Kind(EventKind::kDeviceRemoved, d))) << "device " << d;
  }
  ASSERT_TRUE(tree_->Create().ok());
  for (int d = 0; d < 6; ++d) {
    EXPECT_TRUE(got_.WaitForCount(Kind(EventKind::kDeviceAdded, d), 2)) << "device " << d;
  }
  // And the kernel log, recreated with the tree, is followed as well.
  ASSERT_TRUE(tree_->AppendKmsg(3, "p NEURON_HW_ERR=NC_UNCORRECTABLE_ERROR nd-id=2").ok());
  EXPECT_TRUE(got_.WaitFor(Kind(EventKind::kHardwareError, 2)));
}

TEST_F(EventsTest, PeriodicRescanFindsChangesWithoutInotify) {
  MakeTree("trn1.32xlarge");
  EventsOptions o = InotifyOnly();
  o.rescan = milliseconds(100);
  StartEvents(o);
  // Unbinding the PCI driver happens outside every watched directory; only the rescan sees
  // that rdmap16s25 is no longer an EFA.
  const fs::path driver = RootPaths(root_.path()).PciDevice("0000:10:19.0") / "driver";
  ASSERT_TRUE(fs::is_symlink(driver));
  fs::remove(driver);
  EXPECT_TRUE(got_.WaitFor(EfaKind(EventKind::kEfaRemoved, "rdmap16s25")));
}

TEST_F(EventsTest, UnsubscribedCallbackIsNotCalled) {
  MakeTree("inf2.24xlarge");
  StartEvents();
  std::atomic<int> calls{0};
  const Events::SubscriptionId id = events_->Subscribe([&](const Event&) { ++calls; });
  ASSERT_TRUE(tree_->SetDeviceState(0, DeviceState::kReset).ok());
  ASSERT_TRUE(got_.WaitFor(Kind(EventKind::kDeviceStateChanged, 0)));
  // Ours runs right after the collector's, on the same thread.
  const auto deadline = std::chrono::steady_clock::now() + kCeiling;
  while (calls.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_EQ(calls.load(), 1);
  events_->Unsubscribe(id);
  ASSERT_TRUE(tree_->SetDeviceState(0, DeviceState::kReady).ok());
  ASSERT_TRUE(got_.WaitFor([](const Event& e) {
    return e.kind == EventKind::kDeviceStateChanged && e.state == DeviceState::kReady;
  }));
  events_->Stop();  // no delivery can be in flight now
  EXPECT_EQ(calls.load(), 1);
}

TEST_F(EventsTest, CallbackMayUnsubscribeItself) {
  MakeTree("inf2.24xlarge");
  StartEvents();
  std::atomic<int> calls{0};
  Events::SubscriptionId id = 0;
  std::mutex mu;
  {
    std::lock_guard<std::mutex> lock(mu);
    id = events_->Subscribe([&](const Event&) {
      ++calls;
      std::lock_guard<std::mutex> l(mu);
      events_->Unsubscribe(id);  // from the Events thread: must not deadlock
    });
  }
  ASSERT_TRUE(tree_->SetDeviceState(1, DeviceState::kReset).ok());
  ASSERT_TRUE(tree_->SetDeviceState(2, DeviceState::kReset).ok());
  ASSERT_TRUE(got_.WaitFor(Kind(EventKind::kDeviceStateChanged, 1)));
  ASSERT_TRUE(got_.WaitFor(Kind(EventKind::kDeviceStateChanged, 2)));
  events_->Stop();
  EXPECT_EQ(calls.load(), 1);
}

TEST(Events, StopIsIdempotentAndStartTwiceFails) {
  TempRoot root;
  Events events(RootPaths(root.path()), InotifyOnly());
  ASSERT_TRUE(events.Start().ok());
  EXPECT_EQ(events.Start().code(), absl::StatusCode::kFailedPrecondition);
  events.Stop();
  events.Stop();
}

}  // namespace
}  // namespace neuron
