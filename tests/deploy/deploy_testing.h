#pragma once
// What the deploy tests share (deploy_test.cc, deploy_dra_test.cc): rendering an overlay with the
// real `kubectl kustomize`, finding objects and containers in it, reading a container's flags, and
// the checks every container of the agent, and every unprivileged one, must pass.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace neuron::deploy_testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

inline const fs::path kDeploy = fs::path(NEURON_SOURCE_DIR) / "deploy";
inline constexpr std::string_view kDraOverlay = "overlays/dra";
inline constexpr std::string_view kNodeConditionOverlay = "overlays/node-condition";
inline constexpr std::string_view kResetOverlay = "overlays/reset";

struct ToolRun {
  int code = -1;
  std::string out, err;
};

inline ToolRun RunTool(const std::vector<std::string>& argv) {
  testing::TempDir dir;
  const pid_t pid = testing::Spawn(argv, dir.path() / "out", dir.path() / "err");
  ToolRun r;
  r.code = testing::WaitExit(pid, 120s).value_or(-1);
  r.out = testing::ReadFile(dir.path() / "out");
  r.err = testing::ReadFile(dir.path() / "err");
  return r;
}

inline bool OnPath(const std::string& tool) {
  return RunTool({"sh", "-c", "command -v " + tool}).code == 0;
}

inline std::vector<YAML::Node> Render(const std::string& overlay) {
  ToolRun r = RunTool({"kubectl", "kustomize", (kDeploy / overlay).string()});
  EXPECT_EQ(r.code, 0) << overlay << ": " << r.err;
  return YAML::LoadAll(r.out);
}

inline YAML::Node Find(const std::vector<YAML::Node>& objects, const std::string& kind) {
  for (const YAML::Node& o : objects) {
    if (o["kind"].as<std::string>() == kind) return o;
  }
  return YAML::Node();
}

inline YAML::Node Container(const YAML::Node& daemonset, const std::string& name) {
  for (const YAML::Node& c : daemonset["spec"]["template"]["spec"]["containers"]) {
    if (c["name"].as<std::string>() == name) return c;
  }
  return YAML::Node();
}

// A role's rules as "group/resource" -> verbs ("/nodes" for the core group).
inline std::map<std::string, std::set<std::string>> RuleVerbs(const YAML::Node& role) {
  std::map<std::string, std::set<std::string>> verbs;
  for (const YAML::Node& rule : role["rules"]) {
    for (const YAML::Node& g : rule["apiGroups"]) {
      for (const YAML::Node& r : rule["resources"]) {
        for (const YAML::Node& v : rule["verbs"]) {
          verbs[g.as<std::string>() + "/" + r.as<std::string>()].insert(v.as<std::string>());
        }
      }
    }
  }
  return verbs;
}

// kubectl and promtool are test dependencies (scripts/install-deps.sh): missing, a test fails and
// says so, rather than passing on nothing.
inline std::string Missing(const std::string& tool) {
  return tool + " is not installed: run scripts/install-deps.sh, which says how to get it";
}

inline std::string Args(const YAML::Node& c) {
  std::string joined;
  for (const YAML::Node& a : c["args"]) joined += a.as<std::string>() + " ";
  return joined;
}

// The value of `--flag=value` among the container's args, "" when absent.
inline std::string Arg(const YAML::Node& c, const std::string& flag) {
  for (const YAML::Node& a : c["args"]) {
    const std::string arg = a.as<std::string>();
    if (arg.rfind(flag + "=", 0) == 0) return arg.substr(flag.size() + 1);
  }
  return "";
}

inline void ExpectBounded(const YAML::Node& c) {
  EXPECT_TRUE(c["resources"]["requests"]["memory"]);
  EXPECT_TRUE(c["resources"]["limits"]["memory"]);
  EXPECT_NE(Args(c).find("--log.format=json"), std::string::npos) << Args(c);
  const YAML::Node sc = c["securityContext"];
  EXPECT_TRUE(sc["readOnlyRootFilesystem"].as<bool>(false));
  ASSERT_TRUE(sc["capabilities"]["drop"]);
  EXPECT_EQ(sc["capabilities"]["drop"].as<std::vector<std::string>>(),
            std::vector<std::string>{"ALL"});
  EXPECT_FALSE(sc["capabilities"]["add"]) << "capabilities added";
}

// A container that reads the network (the front, dra-api): nothing privileged about it.
inline void ExpectUnprivileged(const YAML::Node& c) {
  ExpectBounded(c);
  const YAML::Node sc = c["securityContext"];
  EXPECT_FALSE(sc["privileged"].as<bool>(true)) << "privileged: false, said";
  EXPECT_FALSE(sc["allowPrivilegeEscalation"].as<bool>(true)) << "allowPrivilegeEscalation: false";
  EXPECT_TRUE(sc["runAsNonRoot"].as<bool>(false));
  EXPECT_GT(sc["runAsUser"].as<int>(0), 0);
  EXPECT_GT(sc["runAsGroup"].as<int>(0), 0);
  EXPECT_EQ(sc["seccompProfile"]["type"].as<std::string>(""), "RuntimeDefault");
  EXPECT_EQ(Arg(c, "--root"), "") << "it reads nothing of the node";
}

}  // namespace neuron::deploy_testing
