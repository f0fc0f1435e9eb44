// deploy/overlays/reset (components/reset): the policy the ConfigMap ships is one the plugin
// accepts and that resets; the plugin finds it through NEURON_DP_CONFIG at the ConfigMap's mount;
// only this overlay makes /host/sys writable, and it mounts what the active check needs.
#include "plugin/config.h"
#include "tests/deploy/deploy_testing.h"

namespace neuron::deploy_testing {
namespace {

// The container's mounts: mountPath -> (volume name, read-only).
std::map<std::string, std::pair<std::string, bool>> Mounts(const YAML::Node& c) {
  std::map<std::string, std::pair<std::string, bool>> out;
  for (const YAML::Node& m : c["volumeMounts"]) {
    out[m["mountPath"].as<std::string>()] = {m["name"].as<std::string>(),
                                             m["readOnly"].as<bool>(false)};
  }
  return out;
}

std::string Env(const YAML::Node& c, const std::string& name) {
  for (const YAML::Node& e : c["env"]) {
    if (e["name"].as<std::string>() == name) return e["value"].as<std::string>("");
  }
  return "";
}

TEST(DeployReset, TheShippedPolicyResetsAndThePluginReadsIt) {
  if (!OnPath("kubectl")) FAIL() << Missing("kubectl");
  const std::vector<YAML::Node> objects = Render(std::string(kResetOverlay));
  const YAML::Node cm = Find(objects, "ConfigMap");
  ASSERT_TRUE(cm);
  plugin::Config config;
  const absl::Status parsed = plugin::ApplyConfigYaml(cm["data"]["config.yaml"].as<std::string>(),
                                                      "configmap.yaml", &config);
  ASSERT_TRUE(parsed.ok()) << parsed;
  EXPECT_EQ(config.health.ActionFor(EvidenceClass::kState), plugin::Action::kReset);
  EXPECT_EQ(config.health.ActionFor(EvidenceClass::kHwErrors), plugin::Action::kReset);
  EXPECT_EQ(config.health.ActionFor(EvidenceClass::kEcc), plugin::Action::kNode);

  const YAML::Node plugin = Container(Find(objects, "DaemonSet"), "device-plugin");
  const auto mounts = Mounts(plugin);
  const std::string file = Env(plugin, "NEURON_DP_CONFIG");
  ASSERT_FALSE(file.empty());
  const std::string dir = fs::path(file).parent_path().string();
  ASSERT_TRUE(mounts.contains(dir)) << dir;
  EXPECT_TRUE(mounts.at(dir).second);
  for (const std::string& path : {config.health.check_programs, config.health.state_dir}) {
    EXPECT_TRUE(mounts.contains(path)) << path << " is not mounted";
  }
  EXPECT_FALSE(mounts.at("/host/sys").second) << "the reset writes neuronN/reset";
  EXPECT_FALSE(mounts.at(config.health.state_dir).second) << "the check keeps its baseline";
  EXPECT_TRUE(mounts.at(config.health.check_programs).second);
  const std::string libnrt = Env(plugin, "NEURON_LIBNRT");
  EXPECT_TRUE(mounts.contains(fs::path(libnrt).parent_path().string())) << libnrt;
}

TEST(DeployReset, TheBaseMountsSysReadOnly) {
  if (!OnPath("kubectl")) FAIL() << Missing("kubectl");
  const std::vector<YAML::Node> objects = Render("base");
  const auto mounts = Mounts(Container(Find(objects, "DaemonSet"), "device-plugin"));
  EXPECT_TRUE(mounts.at("/host/sys").second);
  EXPECT_FALSE(mounts.contains("/var/lib/neuron-node-agent"));
}

}  // namespace
}  // namespace neuron::deploy_testing
