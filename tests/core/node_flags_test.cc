// core/model/node_flags.h: --root and --lnc over NEURON_ROOT and NEURON_LOGICAL_NC_CONFIG, and
// the errors that name a bad value and where it came from.

#include "core/model/node_flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "tests/support/fake_env.h"

namespace neuron {
namespace {

using ::testing::HasSubstr;

using neuron::testing::EnvOf;

TEST(NodeFlagsTest, DefaultsThenEnvironmentThenFlags) {
  absl::StatusOr<NodeFlags> f = ResolveNodeFlags({}, EnvOf({}));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->root, "/");
  EXPECT_EQ(f->lnc, 0);

  f = ResolveNodeFlags({}, EnvOf({{"NEURON_ROOT", "/host"}, {"NEURON_LOGICAL_NC_CONFIG", "1"}}));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->root, "/host");
  EXPECT_EQ(f->lnc, 1);

  f = ResolveNodeFlags({.root = "/sim", .lnc = "2"},
                       EnvOf({{"NEURON_ROOT", "/host"}, {"NEURON_LOGICAL_NC_CONFIG", "1"}}));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->root, "/sim");
  EXPECT_EQ(f->lnc, 2);
}

// A manifest that sets a variable to "" leaves it unset.
TEST(NodeFlagsTest, EmptyVariablesCountAsUnset) {
  absl::StatusOr<NodeFlags> f =
      ResolveNodeFlags({}, EnvOf({{"NEURON_ROOT", ""}, {"NEURON_LOGICAL_NC_CONFIG", ""}}));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->root, "/");
  EXPECT_EQ(f->lnc, 0);
}

TEST(NodeFlagsTest, BadValuesAreNamedWithTheirSource) {
  for (const char* bad : {"3", "0", "two", "1 ", "-1", "12"}) {
    absl::StatusOr<NodeFlags> f = ResolveNodeFlags({.lnc = bad}, EnvOf({}));
    ASSERT_FALSE(f.ok()) << bad;
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(f.status().message(), "--lnc: '" + std::string(bad) + "' is not 1 or 2");

    f = ResolveNodeFlags({}, EnvOf({{"NEURON_LOGICAL_NC_CONFIG", bad}}));
    ASSERT_FALSE(f.ok()) << bad;
    EXPECT_EQ(f.status().message(),
              "NEURON_LOGICAL_NC_CONFIG: '" + std::string(bad) + "' is not 1 or 2");
  }
  // A bad variable is reported even when the flag overrides it: the runtime reads it too.
  EXPECT_THAT(
      ResolveNodeFlags({.lnc = "1"}, EnvOf({{"NEURON_LOGICAL_NC_CONFIG", "x"}})).status().message(),
      HasSubstr("NEURON_LOGICAL_NC_CONFIG: 'x'"));
  EXPECT_EQ(ResolveNodeFlags({.root = ""}, EnvOf({})).status().message(), "--root: empty");
}

TEST(NodeFlagsTest, ParseLncAcceptsOneAndTwo) {
  EXPECT_EQ(ParseLnc("1", "x").value_or(-1), 1);
  EXPECT_EQ(ParseLnc("2", "x").value_or(-1), 2);
  EXPECT_EQ(ParseLnc("", "lnc").status().message(), "lnc: '' is not 1 or 2");
}

}  // namespace
}  // namespace neuron
