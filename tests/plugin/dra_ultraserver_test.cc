// Prepare of the UltraServer node device `neuron-node` (plugin/dra/driver.h,
// plugin/dra/ultraserver_config.h): every device node and core, the NEURON_RT_ULTRASERVER_*
// environment for each UltraServerConfig mode with values from a simulated trn2u's sysfs
// (driver-sim/driver/ultraserver.h, read by core/discovery/ultraserver.h), the refusals, and
// double booking of the node against its devices and cores.

#include <gtest/gtest.h>

#include "core/discovery/ultraserver.h"
#include "driver-sim/driver/sim_tree.h"
#include "plugin/dra/slice.h"
#include "tests/plugin/dra_driver_testing.h"
#include "tests/plugin/dra_testing.h"

namespace neuron::plugin::dra {
namespace {

using ::neuron::plugin::dra::testing::CatalogHardware;
using nlohmann::json;

json UsConfig(json mode) {
  return {{"apiVersion", "neuron.aws.com/v1"},
          {"kind", "UltraServerConfig"},
          {"ultraserverMode", std::move(mode)}};
}

class DraUltraServerTest : public testing::DriverTest {
 protected:
  // A trn2u.48xlarge at LNC 2 placed by the simulated driver's election at `pos`; its
  // UltraServer attributes as core reads them from the tree the simulator writes.
  void Place(sim::UltraServerPosition pos) {
    const RootPaths root(tmp_.path() / ("root" + std::to_string(++trees_)));
    const InstanceSpec& spec = **FindInstance("trn2u.48xlarge");
    sim::SimTree tree(root, sim::NodeConfig{&spec, 2, "", "", pos});
    ASSERT_TRUE(tree.Create().ok());
    std::vector<std::string> warnings;
    Hardware hw = CatalogHardware("trn2u.48xlarge", 2);
    hw.node.ultraserver = ReadUltraServer(root, &warnings);
    ASSERT_TRUE(hw.node.ultraserver.has_value());
    EXPECT_TRUE(warnings.empty()) << warnings.front();
    state_.SetHardware(hw);
  }

  // The env of neuron-node prepared with `config`, then unprepared.
  json NodeEnv(Driver& driver, const std::optional<json>& config) {
    const ClaimRef ref = claims_.Add("node", {"neuron-node"}, config);
    absl::StatusOr<std::vector<PreparedDevice>> r = PrepareOne(driver, ref);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return json();
    json env = CdiSpec(ref.uid)["devices"][0]["containerEdits"]["env"];
    EXPECT_TRUE(driver.Unprepare({ref}).at(ref.uid).ok());
    return env;
  }

  std::string Refusal(Driver& driver, const std::string& name,
                      const std::vector<std::string>& devices, const json& config) {
    const ClaimRef ref = claims_.Add(name, devices, config);
    const absl::StatusOr<std::vector<PreparedDevice>> r = PrepareOne(driver, ref);
    EXPECT_FALSE(r.ok()) << name;
    EXPECT_FALSE(std::filesystem::exists(CdiSpecPath({.dir = tmp_.path() / "cdi"}, ref.uid)))
        << name;
    return r.ok() ? "" : std::string{r.status().message()};
  }

  int trees_ = 0;
};

TEST_F(DraUltraServerTest, EachModeOfAFourNodeUltraServer) {
  ASSERT_NO_FATAL_FAILURE(Place({.nodes = 4, .node_id = 2, .server_id = 0x77}));
  auto driver = NewDriver();
  const ClaimRef ref = claims_.Add("whole", {"neuron-node"}, UsConfig(4));
  ASSERT_TRUE(PrepareOne(*driver, ref).ok());
  const json edits = CdiSpec(ref.uid)["devices"][0]["containerEdits"];
  ASSERT_EQ(edits["deviceNodes"].size(), 16u);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(edits["deviceNodes"][i]["path"], "/dev/neuron" + std::to_string(i));
  }
  // node_id_4 2, server_id_4 the serial; X4 is mode 1.
  EXPECT_EQ(edits["env"], json({"NEURON_RT_VISIBLE_CORES=0-63", "NEURON_RT_ULTRASERVER_MODE=1",
                                "NEURON_RT_ULTRASERVER_SERVER_ID=0000000000000077",
                                "NEURON_RT_ULTRASERVER_NODE_ID=2"}));
  ASSERT_TRUE(driver->Unprepare({ref}).at(ref.uid).ok());
  // 2 nodes: the init script takes X2V (3) when the node lists it; on a 4-node UltraServer node 2
  // is node 0 of the second vertical pair, whose serial is one less.
  EXPECT_EQ(NodeEnv(*driver, UsConfig(2)),
            json({"NEURON_RT_VISIBLE_CORES=0-63", "NEURON_RT_ULTRASERVER_MODE=3",
                  "NEURON_RT_ULTRASERVER_SERVER_ID=0000000000000076",
                  "NEURON_RT_ULTRASERVER_NODE_ID=0"}));
  // 1 node: X1 (4) and the script's defaults.
  EXPECT_EQ(NodeEnv(*driver, UsConfig(1)),
            json({"NEURON_RT_VISIBLE_CORES=0-63", "NEURON_RT_ULTRASERVER_MODE=4",
                  "NEURON_RT_ULTRASERVER_SERVER_ID=0000000000000000",
                  "NEURON_RT_ULTRASERVER_NODE_ID=-1"}));
  // No config: the node's devices and cores, no UltraServer variables.
  EXPECT_EQ(NodeEnv(*driver, std::nullopt), json({"NEURON_RT_VISIBLE_CORES=0-63"}));
}

TEST_F(DraUltraServerTest, TwoAndOneNodeElectionsRefuseWhatTheNodeIsNotIn) {
  ASSERT_NO_FATAL_FAILURE(Place({.nodes = 2, .node_id = 1, .server_id = 0xabc}));
  auto driver = NewDriver();
  // ultraserver_mode "2,3,4": no X4.
  EXPECT_NE(Refusal(*driver, "four", {"neuron-node"}, UsConfig(4))
                .find("does not support the 4-node UltraServer configuration (its "
                      "ultraserver_mode lists 2,3,4"),
            std::string::npos);
  EXPECT_EQ(NodeEnv(*driver, UsConfig(2)),
            json({"NEURON_RT_VISIBLE_CORES=0-63", "NEURON_RT_ULTRASERVER_MODE=3",
                  "NEURON_RT_ULTRASERVER_SERVER_ID=0000000000000abc",
                  "NEURON_RT_ULTRASERVER_NODE_ID=1"}));
  ASSERT_NO_FATAL_FAILURE(Place({.nodes = 1, .node_id = 0, .server_id = 0xabc}));
  EXPECT_NE(Refusal(*driver, "two", {"neuron-node"}, UsConfig(2)).find("2-node"),
            std::string::npos);
  EXPECT_EQ(NodeEnv(*driver, UsConfig(1))[1], "NEURON_RT_ULTRASERVER_MODE=4");
  // A node that supports X4 but has no id in it (node_id_4 -1) is refused, naming the file.
  Hardware hw = CatalogHardware("trn2u.48xlarge", 2);
  hw.node.ultraserver = UltraServerInfo{.supported_modes = {1, 3, 4}, .memberships = {}};
  state_.SetHardware(hw);
  EXPECT_NE(Refusal(*driver, "none", {"neuron-node"}, UsConfig(4)).find("node_id_4 is -1"),
            std::string::npos);
  // Only X2H: 2 nodes take it.
  hw.node.ultraserver = UltraServerInfo{.supported_modes = {2, 4},
                                        .memberships = {{2, "x2h", 0, "00000000000000aa"}}};
  state_.SetHardware(hw);
  EXPECT_EQ(NodeEnv(*driver, UsConfig(2))[1], "NEURON_RT_ULTRASERVER_MODE=2");
}

TEST_F(DraUltraServerTest, ConfigsThatCannotApplyAreRefused) {
  ASSERT_NO_FATAL_FAILURE(Place({}));
  auto driver = NewDriver();
  EXPECT_NE(Refusal(*driver, "dev", {"neuron-3"}, UsConfig(4))
                .find("claim default/dev: UltraServerConfig applies only to a neuron-node device"),
            std::string::npos);
  EXPECT_NE(Refusal(*driver, "three", {"neuron-node"}, UsConfig(3))
                .find("ultraserverMode 3 is not 1, 2 or 4"),
            std::string::npos);
  EXPECT_NE(Refusal(*driver, "text", {"neuron-node"}, UsConfig("4")).find("not an integer"),
            std::string::npos);
  EXPECT_NE(Refusal(*driver, "kind", {"neuron-node"}, json{{"kind", "NodeConfig"}})
                .find("opaque config kind 'NodeConfig' is not supported"),
            std::string::npos);
  // NeuronConfig keeps its rule on neuron-node: only the node's LNC.
  EXPECT_NE(Refusal(*driver, "lnc", {"neuron-node"},
                    json{{"kind", "NeuronConfig"}, {"logicalNeuronCore", 1}})
                .find("differs from this node's LNC 2"),
            std::string::npos);
  EXPECT_TRUE(driver->prepared().empty());
  EXPECT_TRUE(
      PrepareOne(*driver, claims_.Add("lnc2", {"neuron-node"},
                                      json{{"kind", "NeuronConfig"}, {"logicalNeuronCore", 2}}))
          .ok());
}

TEST_F(DraUltraServerTest, TheNodeConflictsWithEveryDeviceAndCore) {
  ASSERT_NO_FATAL_FAILURE(Place({}));
  auto driver = NewDriver();
  const ClaimRef node = claims_.Add("node", {"neuron-node"}, UsConfig(4));
  ASSERT_TRUE(PrepareOne(*driver, node).ok());
  for (const char* device : {"neuron-3", "neuroncore-5", "neuron-15", "neuroncore-63"}) {
    const absl::StatusOr<std::vector<PreparedDevice>> r =
        PrepareOne(*driver, claims_.Add(std::string("x") + (device + 7), {device}));
    ASSERT_FALSE(r.ok()) << device;
    EXPECT_NE(r.status().message().find("already held by claim default/node (neuron-node)"),
              std::string_view::npos)
        << r.status();
  }
  // EFAs are not the node's: they stay free.
  EXPECT_TRUE(PrepareOne(*driver, claims_.Add("efa", {"efa-rdmap95s0"})).ok());
  // While the driver's attributes cannot be read (an election in progress) the node is not
  // offered to a new claim, and the prepared one still holds every device.
  Hardware busy = CatalogHardware("trn2u.48xlarge", 2);
  state_.SetHardware(busy);
  EXPECT_FALSE(PrepareOne(*driver, claims_.Add("busy", {"neuron-node"})).ok());
  EXPECT_FALSE(PrepareOne(*driver, claims_.Add("busy-dev", {"neuron-0"})).ok());
  ASSERT_NO_FATAL_FAILURE(Place({}));
  ASSERT_TRUE(driver->Unprepare({node}).at(node.uid).ok());
  // The other way round: a device, or one core, keeps the node from being prepared.
  const ClaimRef dev = claims_.Add("dev", {"neuron-3"});
  ASSERT_TRUE(PrepareOne(*driver, dev).ok());
  EXPECT_FALSE(PrepareOne(*driver, claims_.Add("node2", {"neuron-node"})).ok());
  ASSERT_TRUE(driver->Unprepare({dev}).at(dev.uid).ok());
  // Nor can one claim hold the node and one of its devices.
  const absl::StatusOr<std::vector<PreparedDevice>> both =
      PrepareOne(*driver, claims_.Add("both", {"neuron-node", "neuron-9"}));
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("held by this claim (neuron-node)"),
            std::string_view::npos)
      << both.status();
  ASSERT_TRUE(PrepareOne(*driver, claims_.Add("core", {"neuroncore-5"})).ok());
  EXPECT_FALSE(PrepareOne(*driver, claims_.Add("node3", {"neuron-node"})).ok());
}

}  // namespace
}  // namespace neuron::plugin::dra
