// The table of a collective world's meetings (driver-sim/runtime/comm_table.h): when a group is
// complete, what its members get (the latest arrival, sums, gathers), and when it fails (a member
// gone, a deadline passed, data that does not fit).
#include "driver-sim/runtime/comm_table.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "nrt/nrt.h"

namespace neuron::nrt {
namespace {

template <typename T>
std::vector<uint8_t> Bytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

Arrival At(uint32_t rank, std::vector<uint32_t> members, int64_t t, std::vector<uint8_t> data = {},
           Combine combine = Combine::kNone, int dtype = 0) {
  Arrival a;
  a.rank = rank;
  a.key = 42;
  a.seq = 1;
  a.members = std::move(members);
  a.arrive_ns = t;
  a.deadline_ns = 1'000'000;
  a.combine = combine;
  a.dtype = dtype;
  a.data = std::move(data);
  return a;
}

TEST(GroupTableTest, CompleteWhenTheLastMemberArrivesWithTheSumAndTheLatestArrival) {
  GroupTable table(4);
  table.SetMember(2, {1, 7});
  std::vector<Decided> d;
  const std::vector<uint32_t> group = {0, 2};
  table.Arrive(At(2, group, 500, Bytes<float>({1.5f, 2}), Combine::kSum, NRT_DTYPE_FLOAT32), &d);
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(table.pending(), 1u);
  table.Arrive(At(0, group, 300, Bytes<float>({0.5f, -4}), Combine::kSum, NRT_DTYPE_FLOAT32), &d);
  ASSERT_EQ(d.size(), 1u);
  const Outcome& o = *d[0].outcome;
  EXPECT_TRUE(o.complete);
  EXPECT_EQ(o.start_ns, 500);
  ASSERT_EQ(o.members.size(), 2u);
  EXPECT_EQ(o.members[1].node, 1);
  EXPECT_EQ(o.members[1].device, 7);
  ASSERT_TRUE(o.data);
  EXPECT_EQ(*o.data, Bytes<float>({2.0f, -2.0f}));
  EXPECT_EQ(table.pending(), 0u);
}

TEST(GroupTableTest, SumsBfloat16AndGathersInMemberOrder) {
  GroupTable table(3);
  std::vector<Decided> d;
  // bfloat16 1.0 is 0x3f80, 2.0 is 0x4000: 1 + 2 = 3.0, 0x4040.
  table.Arrive(At(0, {0, 1}, 0, Bytes<uint16_t>({0x3f80}), Combine::kSum, NRT_DTYPE_BFLOAT16), &d);
  table.Arrive(At(1, {0, 1}, 0, Bytes<uint16_t>({0x4000}), Combine::kSum, NRT_DTYPE_BFLOAT16), &d);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(*d[0].outcome->data, Bytes<uint16_t>({0x4040}));
  d.clear();
  Arrival b = At(2, {2, 0}, 0, {'b'}, Combine::kGather, NRT_DTYPE_UINT8);
  Arrival a = At(0, {2, 0}, 0, {'a'}, Combine::kGather, NRT_DTYPE_UINT8);
  a.key = b.key = 7;
  table.Arrive(a, &d);
  table.Arrive(b, &d);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(*d[0].outcome->data, (std::vector<uint8_t>{'b', 'a'}));
}

TEST(GroupTableTest, AMemberGoneFailsItsGroupsAtOnceAndLateMembersLearnIt) {
  GroupTable table(3);
  std::vector<Decided> d;
  table.Arrive(At(0, {0, 1, 2}, 0), &d);
  table.MarkGone(2, "rank 2: its process is gone", &d);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_FALSE(d[0].outcome->complete);
  EXPECT_FALSE(d[0].outcome->timed_out);
  EXPECT_EQ(d[0].outcome->missing, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(d[0].outcome->why, "rank 2: its process is gone");
  d.clear();
  table.Arrive(At(1, {0, 1, 2}, 0), &d);  // late to the failed group
  ASSERT_EQ(d.size(), 1u);
  EXPECT_FALSE(d[0].outcome->complete);
  d.clear();
  Arrival next = At(0, {0, 2}, 0);
  next.key = 9;
  table.Arrive(next, &d);  // a new group with the gone member fails on arrival
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].outcome->missing, (std::vector<uint32_t>{2}));
}

TEST(GroupTableTest, TheEarliestDeadlineFailsTheGroupAsTimedOut) {
  GroupTable table(2);
  std::vector<Decided> d;
  table.Arrive(At(0, {0, 1}, 0), &d);
  EXPECT_EQ(table.NextDeadline(), 1'000'000);
  table.Expire(999'999, &d);
  EXPECT_TRUE(d.empty());
  table.Expire(1'000'000, &d);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_TRUE(d[0].outcome->timed_out);
  EXPECT_EQ(d[0].outcome->why, "rank(s) 1 did not arrive in time");
}

TEST(GroupTableTest, DataOfAnotherSizeFailsTheGroupNamingTheRank) {
  GroupTable table(2);
  std::vector<Decided> d;
  table.Arrive(At(0, {0, 1}, 0, {1, 2, 3, 4}, Combine::kSum, NRT_DTYPE_INT32), &d);
  table.Arrive(At(1, {0, 1}, 0, {1, 2}, Combine::kSum, NRT_DTYPE_INT32), &d);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_FALSE(d[0].outcome->complete);
  EXPECT_NE(d[0].outcome->why.find("rank 1 brought 2 bytes"), std::string::npos);
}

TEST(GroupTableTest, AMemberNamingOtherMembersForTheGroupFailsIt) {
  GroupTable table(3);
  std::vector<Decided> d;
  table.Arrive(At(0, {0, 1}, 0), &d);
  table.Arrive(At(1, {1, 0}, 0), &d);  // the same key, the members in another order
  ASSERT_EQ(d.size(), 1u);
  EXPECT_FALSE(d[0].outcome->complete);
  EXPECT_EQ(d[0].outcome->why, "rank 1 named other members for the same group");
}

}  // namespace
}  // namespace neuron::nrt
