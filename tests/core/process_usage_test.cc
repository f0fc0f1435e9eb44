// core/sample/process_usage.h: record lookup, a logical core's counters from the per-physical-core
// counter sets (LNC 1 and 2), which cores a process holds (each kind of evidence alone, the
// driver's lock map under LNC 1 and 2), and busy/FLOP rates between two snapshots, per logical and
// per physical core, on hand-built records with values written literally.

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

// Counter sets are per physical core: at LNC 2 logical core 1 is sets 2 and 3, its busy time their
// mean and everything else their sum (docs/metrics.md#labels-and-liveness).
TEST(ProcessUsageTest, LogicalCoreCountersCombineItsPhysicalSets) {
  DatastoreRecord r = Record(0, 1);
  r.core_counters[2][nds::kTimeInUse] = 100;
  r.core_counters[3][nds::kTimeInUse] = 300;
  r.core_counters[2][nds::kCcTime] = 10;
  r.core_counters[3][nds::kCcTime] = 30;
  r.core_counters[2][nds::kInferCompleted] = 3;
  r.core_counters[3][nds::kInferCompleted] = 1;
  r.core_counters[2][nds::kMemUsageCodeDevice] = 501;
  r.core_counters[3][nds::kMemUsageCodeDevice] = 500;
  r.core_counters[2][nds::kLatencyTotal] = 7;
  EXPECT_EQ(LogicalCoreCounter(r, 1, nds::kTimeInUse, 2), 200u);
  EXPECT_EQ(LogicalCoreCounter(r, 1, nds::kCcTime, 2), 20u);
  EXPECT_EQ(LogicalCoreCounter(r, 1, nds::kInferCompleted, 2), 4u);
  EXPECT_EQ(LogicalCoreCounter(r, 1, nds::kMemUsageCodeDevice, 2), 1001u);
  EXPECT_EQ(LogicalCoreCounter(r, 1, nds::kLatencyTotal, 2), 7u);
  EXPECT_EQ(LogicalCoreCounter(r, 0, nds::kTimeInUse, 2), 0u);
  // At LNC 1 each set is a logical core of its own.
  EXPECT_EQ(LogicalCoreCounter(r, 2, nds::kTimeInUse, 1), 100u);
  EXPECT_EQ(LogicalCoreCounter(r, 3, nds::kMemUsageCodeDevice, 1), 500u);
  EXPECT_EQ(LogicalCoreCounter(r, 1, nds::kTimeInUse, 1), 0u);
  EXPECT_EQ(SumCounterSets(r, {2, 2}, nds::kTimeInUse), 400u);
  // Sets beyond the datastore's 16 read nothing.
  EXPECT_EQ(SumCounterSets(r, {15, 4}, nds::kTimeInUse), 0u);
}

TEST(ProcessUsageTest, Lnc2SlotIsHeldThroughEitherPhysicalSet) {
  DatastoreRecord r = Record(0, 1);
  r.core_counters[3][nds::kMemUsageTensorsDevice] = 4096;  // logical 1's second physical core
  r.core_counters[4][nds::kTimeInUse] = 5;                 // logical 2's first
  EXPECT_THAT(CoreSlotsHeld(r, 4, 2), ElementsAre(1, 2));
  EXPECT_THAT(CoreSlotsHeld(r, 8, 1), ElementsAre(3, 4));
}

TEST(ProcessUsageTest, Lnc2ActivityIsTheMeanOfItsSetsAndEachSetItsOwn) {
  DatastoreRecord a = Record(0, 9);
  DatastoreRecord b = a;
  b.core_counters[2][nds::kTimeInUse] = 2'000'000;  // physical 2 busy the whole 2 s
  b.core_counters[3][nds::kTimeInUse] = 1'000'000;  // physical 3 half of them
  b.core_counters[2][nds::kMacCount] = 1000;
  const Snapshot before = SnapshotOf({a}, 10s, 2);
  const Snapshot after = SnapshotOf({b}, 12s, 2);
  const CoreActivity logical = ActivityBetween(before, after, b, 1);
  EXPECT_EQ(logical.utilization, 0.75);
  EXPECT_EQ(logical.flops_per_s, 1000.0);
  EXPECT_EQ(ActivityBetween(before, after, b, 0).utilization, 0.0);
  EXPECT_EQ(PhysicalActivityBetween(before, after, b, 2).utilization, 1.0);
  EXPECT_EQ(PhysicalActivityBetween(before, after, b, 3).utilization, 0.5);
  EXPECT_EQ(PhysicalActivityBetween(before, after, b, 3).flops_per_s, 0.0);
  EXPECT_FALSE(PhysicalActivityBetween(before, after, b, nds::kMaxCores).utilization);
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
