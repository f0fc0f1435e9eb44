// core/discovery/ultraserver.h on class attribute files written literally as aws-neuron-driver
// 2.24.7 prints them (v3/neuron_pelect.c:1700-1768, v3/neuron_dhal_v3.c:1983-2020): a node in a
// 4-node UltraServer, one in a 2-node one, one outside any, the election in progress, a driver
// without the files, and malformed values.
#include "core/discovery/ultraserver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::TempDir;

class UltraServerReadTest : public ::testing::Test {
 protected:
  // The five class files of sys/class/neuron_device/.
  void Files(const std::string& mode, const std::string& node4, const std::string& server4,
             const std::string& node2, const std::string& server2) {
    const std::filesystem::path dir = root_.path() / "sys/class/neuron_device";
    testing::WriteFile(dir / "ultraserver_mode", mode);
    testing::WriteFile(dir / "node_id_4", node4);
    testing::WriteFile(dir / "server_id_4", server4);
    testing::WriteFile(dir / "node_id_2", node2);
    testing::WriteFile(dir / "server_id_2", server2);
  }
  std::optional<UltraServerInfo> Read() {
    warnings_.clear();
    return ReadUltraServer(RootPaths(root_.path()), &warnings_);
  }

  TempDir root_;
  std::vector<std::string> warnings_;
};

TEST_F(UltraServerReadTest, NodeOfAFourNodeUltraServerIsInTheX4AndAnX2vConfiguration) {
  Files("1,3,4\n", "3\n", "00c0ffee00000042\n", "1\n", "00c0ffee00000041\n");
  const std::optional<UltraServerInfo> us = Read();
  ASSERT_TRUE(us.has_value());
  EXPECT_THAT(us->supported_modes, ElementsAre(1, 3, 4));
  ASSERT_EQ(us->memberships.size(), 2u);
  EXPECT_EQ(us->memberships[0], (UltraServerMembership{4, "x4", 3, "00c0ffee00000042"}));
  EXPECT_EQ(us->memberships[1], (UltraServerMembership{2, "x2v", 1, "00c0ffee00000041"}));
  EXPECT_THAT(warnings_, IsEmpty());
}

TEST_F(UltraServerReadTest, TwoNodeUltraServerWithHorizontalLinksIsX2hOnly) {
  Files("2,3,4\n", "-1\n", "0000000000000000\n", "1\n", "00000000abcdef01\n");
  const std::optional<UltraServerInfo> us = Read();
  ASSERT_TRUE(us.has_value());
  ASSERT_EQ(us->memberships.size(), 1u);
  EXPECT_EQ(us->memberships[0], (UltraServerMembership{2, "x2h", 1, "00000000abcdef01"}));
}

TEST_F(UltraServerReadTest, OutsideAnUltraServerThereIsNoMembership) {
  Files("\n", "-1\n", "0000000000000000\n", "-1\n", "0000000000000000\n");
  const std::optional<UltraServerInfo> us = Read();
  ASSERT_TRUE(us.has_value());
  EXPECT_THAT(us->supported_modes, IsEmpty());
  EXPECT_THAT(us->memberships, IsEmpty());
  EXPECT_THAT(warnings_, IsEmpty());
}

TEST_F(UltraServerReadTest, ElectionInProgressIsUnknownAndSaysSo) {
  Files("busy\n", "busy\n", "0000000000000000\n", "busy\n", "0000000000000000\n");
  EXPECT_FALSE(Read().has_value());
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_THAT(warnings_[0], HasSubstr("ultraserver_mode: busy"));
}

TEST_F(UltraServerReadTest, NoFilesIsAbsentWithoutWarnings) {
  EXPECT_FALSE(Read().has_value());
  EXPECT_THAT(warnings_, IsEmpty());
}

TEST_F(UltraServerReadTest, MalformedValuesAreWarningsAndLeaveTheirConfigurationOut) {
  Files("1,3,4\n", "two\n", "00c0ffee00000042\n", "0\n", "c0ffee\n");
  const std::optional<UltraServerInfo> us = Read();
  ASSERT_TRUE(us.has_value());
  EXPECT_THAT(us->memberships, IsEmpty());
  ASSERT_EQ(warnings_.size(), 2u);
  EXPECT_THAT(warnings_[0], HasSubstr("node_id_4"));
  EXPECT_THAT(warnings_[1], HasSubstr("server_id_2"));
  Files("1,9\n", "0\n", "00c0ffee00000042\n", "0\n", "00c0ffee00000042\n");
  EXPECT_FALSE(Read().has_value());
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_THAT(warnings_[0], HasSubstr("mode 9"));
}

}  // namespace
}  // namespace neuron
