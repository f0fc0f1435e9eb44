// The simulated driver's UltraServer class attributes (driver-sim/driver/ultraserver.h,
// driver-sim/README.md#ultraserver): the exact files for places after an election of 4, 2 and 1
// nodes (values worked out by hand from aws-neuron-driver 2.24.7 v3/neuron_pelect.c:1250-1410 and
// 1700-1768), the values outside an UltraServer, core's reader on the tree the simulator writes,
// and `neuron-sim up`'s --ultraserver-* flags (accepted on trn2u.48xlarge only).
#include "driver-sim/driver/ultraserver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "core/discovery/ultraserver.h"
#include "driver-sim/driver/sim_tree.h"
#include "tests/support/process.h"
#include "tests/support/sim_node.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace neuron::sim {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using namespace std::chrono_literals;

const InstanceSpec& Spec(std::string_view name) { return **FindInstance(name); }

std::map<std::string, std::string> Files(std::string_view instance, UltraServerPosition pos) {
  std::map<std::string, std::string> out;
  for (auto& [name, value] : UltraServerClassFiles(Spec(instance), pos)) out[name] = value;
  return out;
}

using FileMap = std::map<std::string, std::string>;

TEST(UltraServerFilesTest, FourNodeUltraServerFromEachNode) {
  const uint64_t serial = 0x00c0ffee00000042;
  // node_id_2 and server_id_2: the X2V view, pairs {0, 1} and {2, 3}, the second serial - 1.
  const std::map<int, std::pair<std::string, std::string>> x2v = {
      {0, {"0\n", "00c0ffee00000042\n"}},
      {1, {"1\n", "00c0ffee00000042\n"}},
      {2, {"0\n", "00c0ffee00000041\n"}},
      {3, {"1\n", "00c0ffee00000041\n"}}};
  for (const auto& [node, view2] : x2v) {
    SCOPED_TRACE(node);
    EXPECT_EQ(Files("trn2u.48xlarge", {.nodes = 4, .node_id = node, .server_id = serial}),
              (FileMap{{"node_id_2", view2.first},
                       {"node_id_4", std::to_string(node) + "\n"},
                       {"server_id_2", view2.second},
                       {"server_id_4", "00c0ffee00000042\n"},
                       {"ultraserver_mode", "1,3,4\n"}}));
  }
}

TEST(UltraServerFilesTest, TwoAndOneNodeElections) {
  EXPECT_EQ(Files("trn2u.48xlarge", {.nodes = 2, .node_id = 1, .server_id = 0xabc}),
            (FileMap{{"node_id_2", "1\n"},
                     {"node_id_4", "-1\n"},
                     {"server_id_2", "0000000000000abc\n"},
                     {"server_id_4", "0000000000000000\n"},
                     {"ultraserver_mode", "2,3,4\n"}}));
  EXPECT_EQ(Files("trn2u.48xlarge", {.nodes = 1, .node_id = 0, .server_id = 0xabc}),
            (FileMap{{"node_id_2", "-1\n"},
                     {"node_id_4", "-1\n"},
                     {"server_id_2", "0000000000000000\n"},
                     {"server_id_4", "0000000000000000\n"},
                     {"ultraserver_mode", "4\n"}}));
}

TEST(UltraServerFilesTest, OtherTypesReadAsOutsideAnyUltraServer) {
  const FileMap outside{{"node_id_2", "-1\n"},
                        {"node_id_4", "-1\n"},
                        {"server_id_2", "0000000000000000\n"},
                        {"server_id_4", "0000000000000000\n"},
                        {"ultraserver_mode", "\n"}};
  for (const char* type : {"trn2.48xlarge", "trn1.32xlarge", "inf2.xlarge"}) {
    EXPECT_EQ(Files(type, {}), outside) << type;
  }
}

TEST(UltraServerFilesTest, PlacesThatCannotBeAreRefused) {
  EXPECT_TRUE(ValidateUltraServer(Spec("trn2u.48xlarge"), {}).ok());
  EXPECT_FALSE(ValidateUltraServer(Spec("trn2.48xlarge"), {}).ok());
  EXPECT_FALSE(ValidateUltraServer(Spec("trn2u.48xlarge"), {.nodes = 3}).ok());
  EXPECT_FALSE(ValidateUltraServer(Spec("trn2u.48xlarge"), {.nodes = 2, .node_id = 2}).ok());
  EXPECT_FALSE(ValidateUltraServer(Spec("trn2u.48xlarge"), {.node_id = -1}).ok());
  EXPECT_FALSE(ValidateUltraServer(Spec("trn2u.48xlarge"), {.server_id = 1}).ok());
}

// core reads what the simulator writes into a whole tree.
TEST(UltraServerFilesTest, CoreReadsTheSimulatedTree) {
  neuron::testing::TempDir dir;
  SimTree tree(RootPaths(dir.path()),
               NodeConfig{&Spec("trn2u.48xlarge"), 2, "", "", {.node_id = 2, .server_id = 0x77}});
  ASSERT_TRUE(tree.Create().ok());
  std::vector<std::string> warnings;
  const std::optional<UltraServerInfo> us = ReadUltraServer(RootPaths(dir.path()), &warnings);
  ASSERT_TRUE(us.has_value());
  EXPECT_THAT(warnings, IsEmpty());
  ASSERT_EQ(us->memberships.size(), 2u);
  EXPECT_EQ(us->memberships[0], (UltraServerMembership{4, "x4", 2, "0000000000000077"}));
  EXPECT_EQ(us->memberships[1], (UltraServerMembership{2, "x2v", 0, "0000000000000076"}));
}

TEST(UltraServerUpTest, FlagsPlaceTheNodeOnTrn2uAndAreRefusedElsewhere) {
  neuron::testing::TempDir dir;
  {
    neuron::testing::SimNode node(
        {.sim_bin = NEURON_SIM_BIN, .root = dir.path() / "us", .logs = dir.path()});
    ASSERT_TRUE(node.Up("trn2u.48xlarge", {"--ultraserver-node-id", "3", "--ultraserver-server-id",
                                           "0123456789abcdef"}))
        << node.Log();
    const std::filesystem::path cls = dir.path() / "us/sys/class/neuron_device";
    EXPECT_EQ(neuron::testing::ReadFile(cls / "node_id_4"), "3\n");
    EXPECT_EQ(neuron::testing::ReadFile(cls / "server_id_2"), "0123456789abcdee\n");
    EXPECT_EQ(neuron::testing::ReadFile(cls / "ultraserver_mode"), "1,3,4\n");
  }
  const std::filesystem::path out = dir.path() / "refused.out", err = dir.path() / "refused.err";
  const pid_t refused = neuron::testing::Spawn(
      {NEURON_SIM_BIN, "up", "--instance", "trn2.48xlarge", "--ultraserver-node-id", "1", "--root",
       (dir.path() / "plain").string()},
      out, err);
  EXPECT_EQ(neuron::testing::WaitExit(refused, 30s), 2);
  EXPECT_THAT(neuron::testing::ReadFile(err), HasSubstr("not trn2.48xlarge"));
  const pid_t bad_id = neuron::testing::Spawn(
      {NEURON_SIM_BIN, "up", "--instance", "trn2u.48xlarge", "--ultraserver-server-id", "12ab",
       "--root", (dir.path() / "bad").string()},
      out, err);
  EXPECT_EQ(neuron::testing::WaitExit(bad_id, 30s), 2);
  EXPECT_THAT(neuron::testing::ReadFile(err), HasSubstr("expected 16 hex digits"));
}

}  // namespace
}  // namespace neuron::sim
