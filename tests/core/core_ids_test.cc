// core/model/core_ids.h: the NEURON_RT_VISIBLE_CORES numbering
// (docs/runtime.md#reservation-and-indices), with values written literally: trn2 at LNC 2 has 4
// logical cores per device.

#include "core/model/core_ids.h"

#include <gtest/gtest.h>

namespace neuron {
namespace {

TEST(CoreIdsTest, DeviceTimesCoresPerDevicePlusLocalCore) {
  EXPECT_EQ(GlobalCoreId(0, 0, 4), 0);
  EXPECT_EQ(GlobalCoreId(5, 3, 4), 23);
  EXPECT_EQ(GlobalCoreId(15, 7, 8), 127);
  EXPECT_EQ(DeviceOfCore(23, 4), 5);
  EXPECT_EQ(LocalCoreOf(23, 4), 3);
  EXPECT_EQ(DeviceOfCore(11, 2), 5);
  EXPECT_EQ(LocalCoreOf(11, 2), 1);
}

TEST(CoreIdsTest, RoundTripsForEveryCoreOfANode) {
  for (const int cpd : {1, 2, 4, 8}) {
    for (int id = 0; id < 16 * cpd; ++id) {
      EXPECT_EQ(GlobalCoreId(DeviceOfCore(id, cpd), LocalCoreOf(id, cpd), cpd), id) << cpd;
    }
  }
}

// An inventory that knows no core count yet says 0 cores per device: one per device, never a
// division by zero.
TEST(CoreIdsTest, UnknownCoresPerDeviceCountsAsOne) {
  EXPECT_EQ(GlobalCoreId(3, 0, 0), 3);
  EXPECT_EQ(DeviceOfCore(3, 0), 3);
  EXPECT_EQ(LocalCoreOf(3, 0), 0);
}

}  // namespace
}  // namespace neuron
