// The bytes CostCollective says one rank sends, against the ring algorithms written out here by
// hand (docs/runtime.md#collectives): the cluster tests compare the EFA counters with
// CostCollective, so this pins CostCollective itself to the algorithm. A ring all-reduce of B bytes
// over k members sends 2(k-1)/k * B per member; an all-gather or a reduce-scatter (k-1)/k * B.
// Between nodes each of a node's n ranks handles its 1/n shard in a ring over the m nodes.
#include <gtest/gtest.h>

#include "driver-sim/runtime/timing.h"

namespace neuron::nrt {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

TEST(CollectiveCostTest, AllReduceSendsTwiceTheRingShare) {
  const CollectivePath path;
  // 2 ranks on each of 2 nodes, 1 MiB: within the node 2*(1/2)*1 MiB; over EFA 2*(1/2)*1 MiB / 2.
  const CollectiveCost c = CostCollective(CollKind::kAllReduce, kMiB, 2, 2, path);
  EXPECT_DOUBLE_EQ(c.ring_bytes, 1.0 * kMiB);
  EXPECT_DOUBLE_EQ(c.efa_bytes, 512.0 * 1024);
  // 32 ranks on each of 4 nodes, 256 MiB: 2*(31/32)*256 MiB; over EFA 2*(3/4)*256 MiB / 32.
  const CollectiveCost big = CostCollective(CollKind::kAllReduce, 256 * kMiB, 32, 4, path);
  EXPECT_DOUBLE_EQ(big.ring_bytes, 496 * kMiB);
  EXPECT_DOUBLE_EQ(big.efa_bytes, 12 * kMiB);
}

TEST(CollectiveCostTest, AllGatherAndReduceScatterSendTheRingShareOnce) {
  const CollectivePath path;
  for (const CollKind kind : {CollKind::kAllGather, CollKind::kReduceScatter}) {
    // 8 ranks on each of 2 nodes, 64 MiB: (7/8)*64 MiB; over EFA (1/2)*64 MiB / 8.
    const CollectiveCost c = CostCollective(kind, 64 * kMiB, 8, 2, path);
    EXPECT_DOUBLE_EQ(c.ring_bytes, 56 * kMiB) << CollKindName(kind);
    EXPECT_DOUBLE_EQ(c.efa_bytes, 4 * kMiB) << CollKindName(kind);
  }
}

TEST(CollectiveCostTest, OneNodeSendsNothingOverEfaAndOneRankNothingInTheNode) {
  const CollectivePath path;
  const CollectiveCost node = CostCollective(CollKind::kAllReduce, kMiB, 32, 1, path);
  EXPECT_EQ(node.efa_bytes, 0);
  EXPECT_EQ(node.efa_ns, 0);
  const CollectiveCost alone = CostCollective(CollKind::kAllReduce, kMiB, 1, 2, path);
  EXPECT_EQ(alone.ring_bytes, 0);
  EXPECT_DOUBLE_EQ(alone.efa_bytes, 1.0 * kMiB);  // 2*(1/2)*1 MiB / 1
}

}  // namespace
}  // namespace neuron::nrt
