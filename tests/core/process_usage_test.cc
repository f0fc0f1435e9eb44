// core/sample/process_usage.h: record lookup, which cores a process holds (each kind of evidence
// alone, the driver's lock map under LNC 1 and 2), and busy/FLOP rates between two snapshots,
// on hand-built records with values written literally.

#include "core/sample/process_usage.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace neuron {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using namespace std::chrono_literals;

DatastoreRecord Record(int device, int pid) {
  DatastoreRecord r;
  r.device = device;
  r.pid = pid;
  return r;
}

Snapshot SnapshotOf(std::vector<DatastoreRecord> records, std::chrono::steady_clock::duration at,
                    int lnc = 1) {
  Snapshot s;
  s.lnc = lnc;
  s.steady = std::chrono::steady_clock::time_point(at);
  s.processes = std::move(records);
  return s;
}

TEST(ProcessUsageTest, FindsRecordsByDeviceAndPid) {
  const Snapshot s = SnapshotOf({Record(0, 10), Record(0, 11), Record(3, 10)}, 1s);
  ASSERT_NE(FindRecord(&s, 3, 10), nullptr);
  EXPECT_EQ(FindRecord(&s, 3, 10)->device, 3);
  EXPECT_EQ(FindRecord(&s, 0, 11)->pid, 11);
  EXPECT_EQ(FindRecord(&s, 3, 11), nullptr);
  EXPECT_EQ(FindRecord(nullptr, 0, 10), nullptr);
  const std::vector<const DatastoreRecord*> of10 = RecordsOf(s, 10);
  ASSERT_EQ(of10.size(), 2u);
  EXPECT_EQ(of10[0]->device, 0);
  EXPECT_EQ(of10[1]->device, 3);
  EXPECT_THAT(RecordsOf(s, 99), IsEmpty());
}

// Each kind of use alone makes a slot held; an untouched slot is not, whatever the process did
// elsewhere (host memory is the device's, not a core's).
TEST(ProcessUsageTest, EachKindOfUseHoldsItsSlotAlone) {
  DatastoreRecord r = Record(0, 1);
  r.core_counters[0][nds::kTimeInUse] = 5;
  r.core_counters[1][nds::kModelLoadCount] = 1;
  r.core_counters[2][nds::kMemUsageTensorsDevice] = 4096;
  r.core_counters[3][nds::kMemUsageMiscDevice] = 1;
  r.core_counters[5][nds::kMemUsageCodeDevice] = 1;
  r.device_counters[nds::kMemUsageTensorsHost] = 1 << 20;
  r.core_counters[6][nds::kInferCompleted] = 0;
  EXPECT_THAT(CoreSlotsHeld(r, 8, 1), ElementsAre(0, 1, 2, 3, 5));
  EXPECT_FALSE(HoldsCore(r, 4, 1));
  EXPECT_FALSE(HoldsCore(r, 6, 1));
  // Only the device's own slots count.
  EXPECT_THAT(CoreSlotsHeld(r, 2, 1), ElementsAre(0, 1));
  EXPECT_FALSE(HoldsCore(r, -1, 1));
  EXPECT_FALSE(HoldsCore(r, nds::kMaxCores, 1));
}

// A core reserved but not yet run on shows only in the driver's lock map: bit i is physical
// core i, and with LNC 2 a logical slot covers two physical cores. The driver checks physical
// cores 0-3 only.
TEST(ProcessUsageTest, DriverLockMapHoldsReservedIdleCores) {
  DatastoreRecord r = Record(1, 7);
  EXPECT_THAT(CoreSlotsHeld(r, 4, 1), IsEmpty());
  r.driver = DriverProcessInfo{.nc_lock_map = 0b0100};
  EXPECT_THAT(CoreSlotsHeld(r, 4, 1), ElementsAre(2));
  EXPECT_THAT(CoreSlotsHeld(r, 4, 2), ElementsAre(1));
  r.driver->nc_lock_map = 0b1000'0001;
  EXPECT_THAT(CoreSlotsHeld(r, 4, 1), ElementsAre(0));
  EXPECT_THAT(CoreSlotsHeld(r, 4, 2), ElementsAre(0));
  // Slot 2 under LNC 2 is physical cores 4 and 5: beyond what the lock map reports.
  r.driver->nc_lock_map = 0xff;
  EXPECT_THAT(CoreSlotsHeld(r, 4, 2), ElementsAre(0, 1));
}

TEST(ProcessUsageTest, CoresHeldByAreGlobalIdsOverEveryDevice) {
  DatastoreRecord d0 = Record(0, 42);
  d0.core_counters[1][nds::kTimeInUse] = 1;
  DatastoreRecord d2 = Record(2, 42);
  d2.core_counters[0][nds::kTimeInUse] = 1;
  d2.core_counters[1][nds::kMemUsageCodeDevice] = 1;
  DatastoreRecord other = Record(1, 43);
  other.core_counters[0][nds::kTimeInUse] = 1;
  const Snapshot s = SnapshotOf({d0, other, d2}, 1s);
  EXPECT_THAT(CoresHeldBy(s, 42, 2), ElementsAre(1, 4, 5));
  EXPECT_THAT(CoresHeldBy(s, 43, 2), ElementsAre(2));
  EXPECT_THAT(CoresHeldBy(s, 44, 2), IsEmpty());
}

TEST(ProcessUsageTest, ActivityIsBusyFractionAndFlopsOverTheWindow) {
  DatastoreRecord a = Record(0, 9);
  a.core_counters[1][nds::kTimeInUse] = 1'000'000;
  a.core_counters[1][nds::kMacCount] = 100;
  DatastoreRecord b = a;
  b.core_counters[1][nds::kTimeInUse] = 2'500'000;  // 1.5 s busy in 2 s
  b.core_counters[1][nds::kMacCount] = 1100;        // 1000 MACs = 2000 FLOPs in 2 s
  const Snapshot before = SnapshotOf({a}, 10s);
  const Snapshot after = SnapshotOf({b}, 12s);
  const CoreActivity act = ActivityBetween(before, after, after.processes[0], 1);
  ASSERT_TRUE(act.utilization);
  EXPECT_DOUBLE_EQ(*act.utilization, 0.75);
  ASSERT_TRUE(act.flops_per_s);
  EXPECT_DOUBLE_EQ(*act.flops_per_s, 1000.0);
  // An idle slot: zero, not absent.
  const CoreActivity idle = ActivityBetween(before, after, after.processes[0], 0);
  EXPECT_EQ(idle.utilization, 0.0);
  EXPECT_EQ(idle.flops_per_s, 0.0);
}

TEST(ProcessUsageTest, ActivityIsClampedOrAbsentWhenUnknown) {
  DatastoreRecord a = Record(0, 9);
  a.core_counters[0][nds::kTimeInUse] = 500;
  a.core_counters[0][nds::kMacCount] = 10;
  DatastoreRecord b = a;
  b.core_counters[0][nds::kTimeInUse] = 5'000'500;  // an execution of 5 s landed in 1 s
  const Snapshot before = SnapshotOf({a}, 1s);
  const Snapshot after = SnapshotOf({b}, 2s);
  EXPECT_EQ(ActivityBetween(before, after, b, 0).utilization, 1.0);

  // A counter that went down (a torn read) is unknown, not a restart from zero.
  DatastoreRecord down = a;
  down.core_counters[0][nds::kTimeInUse] = 100;
  down.core_counters[0][nds::kMacCount] = 11;
  const CoreActivity d = ActivityBetween(before, SnapshotOf({down}, 2s), down, 0);
  EXPECT_FALSE(d.utilization);
  EXPECT_EQ(d.flops_per_s, 2.0);

  // No record of the process before: it started within the window.
  DatastoreRecord stranger = Record(1, 9);
  EXPECT_FALSE(ActivityBetween(before, after, stranger, 0).utilization);
  // Time did not advance; a slot out of range.
  EXPECT_FALSE(ActivityBetween(before, SnapshotOf({b}, 1s), b, 0).utilization);
  EXPECT_FALSE(ActivityBetween(before, after, b, nds::kMaxCores).flops_per_s);
}

}  // namespace
}  // namespace neuron
