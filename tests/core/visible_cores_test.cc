#include "core/model/visible_cores.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace neuron {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// docs/runtime.md#environment: "3,4,5,6", "3-6" and "3-5,6" all name cores 3 to 6.
TEST(VisibleCoresTest, ListRangeAndMixedSyntaxNameTheSameCores) {
  for (const char* text : {"3,4,5,6", "3-6", "3-5,6", " 3 - 4 , 5-6 "}) {
    absl::StatusOr<CoreRange> r = ParseVisibleCores(text);
    ASSERT_TRUE(r.ok()) << text << ": " << r.status();
    EXPECT_EQ(*r, (CoreRange{3, 4})) << text;
    EXPECT_EQ(r->last(), 6);
  }
  absl::StatusOr<CoreRange> one = ParseVisibleCores("12");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, (CoreRange{12, 1}));
}

// docs/runtime.md#environment: "3,5,6 is invalid" (not contiguous).
TEST(VisibleCoresTest, NonContiguousSetIsRejectedNamingTheGap) {
  absl::StatusOr<CoreRange> r = ParseVisibleCores("3,5,6");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("NEURON_RT_VISIBLE_CORES=\"3,5,6\""));
  EXPECT_THAT(r.status().message(), HasSubstr("contiguous"));
  EXPECT_THAT(r.status().message(), HasSubstr("3 is followed by 5"));
  // Increasing is part of the rule too.
  EXPECT_THAT(ParseVisibleCores("5,4").status().message(), HasSubstr("5 is followed by 4"));
  // ParseCoreList itself accepts any set, in order.
  absl::StatusOr<std::vector<int>> list = ParseCoreList("3,5-6,1");
  ASSERT_TRUE(list.ok());
  EXPECT_THAT(*list, ElementsAre(3, 5, 6, 1));
}

TEST(VisibleCoresTest, MalformedTextGetsAClearMessage) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{{"", "no cores listed"},
                                         {"  ", "no cores listed"},
                                         {"3,,4", "empty item"},
                                         {"3,", "empty item"},
                                         {"a", "\"a\" is not a core index"},
                                         {"-1", "\"-1\" is not a core index"},
                                         {"3-", "missing a core index"},
                                         {"6-3", "range 6-3 is decreasing"},
                                         {"3-5,4", "core 4 is listed twice"},
                                         {"1.5", "\"1.5\" is not a core index"},
                                         {"99999999999", "too large"}}) {
    absl::StatusOr<std::vector<int>> r = ParseCoreList(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(r.status().message(), HasSubstr(c.says)) << c.text;
  }
}

TEST(VisibleCoresTest, RangeMustExistOnTheInstance) {
  EXPECT_TRUE(CheckCoreRange({30, 2}, 32).ok());
  absl::Status s = CheckCoreRange({31, 2}, 32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("core 32 does not exist"));
  EXPECT_THAT(s.message(), HasSubstr("cores 0-31"));
}

TEST(VisibleCoresTest, FormatRoundTrips) {
  EXPECT_EQ(FormatVisibleCores({3, 4}), "3-6");
  EXPECT_EQ(FormatVisibleCores({7, 1}), "7");
  for (CoreRange r : {CoreRange{0, 32}, CoreRange{5, 1}, CoreRange{16, 8}}) {
    absl::StatusOr<CoreRange> back = ParseVisibleCores(FormatVisibleCores(r));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, r);
  }
  const std::vector<int> cores{0, 1, 2, 3, 8, 10, 11};
  EXPECT_EQ(FormatCoreList(cores), "0-3,8,10-11");
  EXPECT_EQ(FormatCoreList(std::vector<int>{}), "");
  absl::StatusOr<std::vector<int>> back = ParseCoreList(FormatCoreList(cores));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, cores);
}

}  // namespace
}  // namespace neuron
