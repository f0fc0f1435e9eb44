// --api dra and its settings through the plugin's config layers (file, environment, flags).

#include <gtest/gtest.h>

#include <map>

#include "plugin/config.h"
#include "tests/support/fake_env.h"

namespace neuron::plugin {
namespace {

using neuron::testing::EnvOf;

TEST(DraConfigTest, DefaultsAreTheDevicePlugin) {
  absl::StatusOr<Config> c = ResolveConfig(Flags{}, EnvOf({}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->api, Api::kDevicePlugin);
  EXPECT_EQ(c->cdi_dir, "/var/run/cdi");
  EXPECT_EQ(c->dra_claims, "unix:/run/neuron-node-agent/dra-api.sock");
  EXPECT_EQ(c->dra_taint_effect, "NoSchedule");
  EXPECT_FALSE(c->dra_partitionable);
}

TEST(DraConfigTest, DraNeedsTheNodeNameFromFlagOrDownwardApi) {
  Flags f;
  f.api = "dra";
  absl::StatusOr<Config> missing = ResolveConfig(f, EnvOf({}));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("NODE_NAME"), std::string_view::npos);
  absl::StatusOr<Config> env = ResolveConfig(f, EnvOf({{"NODE_NAME", "ip-10-0-0-1.ec2.internal"}}));
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->api, Api::kDra);
  EXPECT_EQ(env->node_name, "ip-10-0-0-1.ec2.internal");
  f.node_name = "node-b";  // the flag wins
  EXPECT_EQ(ResolveConfig(f, EnvOf({{"NODE_NAME", "node-a"}}))->node_name, "node-b");
  absl::StatusOr<Config> byenv =
      ResolveConfig(Flags{}, EnvOf({{"NEURON_DP_API", "dra"}, {"NODE_NAME", "n"}}));
  ASSERT_TRUE(byenv.ok());
  EXPECT_EQ(byenv->api, Api::kDra);
}

TEST(DraConfigTest, FileEnvironmentAndFlagsOfTheDraSettings) {
  Config c;
  ASSERT_TRUE(ApplyConfigYaml("api: dra\nnode_name: n1\ncdi_dir: /etc/cdi\n"
                              "dra:\n  claims: unix:/x.sock\n  taint_effect: NoExecute\n",
                              "f.yaml", &c)
                  .ok());
  EXPECT_EQ(c.api, Api::kDra);
  EXPECT_EQ(c.node_name, "n1");
  EXPECT_EQ(c.cdi_dir, "/etc/cdi");
  EXPECT_EQ(c.dra_claims, "unix:/x.sock");
  EXPECT_EQ(c.dra_taint_effect, "NoExecute");
  const absl::Status bad = ApplyConfigYaml("dra:\n  taint_effect: Evict\n", "f.yaml", &c);
  EXPECT_NE(bad.message().find("f.yaml:2: dra.taint_effect: 'Evict' is not NoSchedule or "
                               "NoExecute"),
            std::string_view::npos)
      << bad;
  EXPECT_FALSE(ApplyConfigYaml("dra:\n  claim: x\n", "f.yaml", &c).ok());  // a typo
  EXPECT_FALSE(ApplyConfigYaml("api: both\n", "f.yaml", &c).ok());
  Flags f;
  f.api = "dra";
  f.node_name = "n";
  f.dra_taint_effect = "noexecute";
  const absl::Status flag = ResolveConfig(f, EnvOf({})).status();
  EXPECT_NE(flag.message().find("--dra.taint-effect"), std::string_view::npos) << flag;
  EXPECT_FALSE(ResolveConfig(Flags{}, EnvOf({{"NEURON_DP_DRA_TAINT_EFFECT", "x"}})).ok());
}

TEST(DraConfigTest, PartitionableThroughEachLayer) {
  Config c;
  ASSERT_TRUE(ApplyConfigYaml("dra:\n  partitionable: true\n", "f.yaml", &c).ok());
  EXPECT_TRUE(c.dra_partitionable);
  const absl::Status bad = ApplyConfigYaml("dra:\n  partitionable: maybe\n", "f.yaml", &c);
  EXPECT_NE(bad.message().find("f.yaml:2: dra.partitionable"), std::string_view::npos) << bad;
  absl::StatusOr<Config> env =
      ResolveConfig(Flags{}, EnvOf({{"NEURON_DP_DRA_PARTITIONABLE", "true"}}));
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_TRUE(env->dra_partitionable);
  Flags f;
  f.dra_partitionable = false;  // the flag wins over the environment
  EXPECT_FALSE(
      ResolveConfig(f, EnvOf({{"NEURON_DP_DRA_PARTITIONABLE", "true"}}))->dra_partitionable);
  EXPECT_FALSE(ResolveConfig(Flags{}, EnvOf({{"NEURON_DP_DRA_PARTITIONABLE", "yes please"}})).ok());
}

}  // namespace
}  // namespace neuron::plugin
