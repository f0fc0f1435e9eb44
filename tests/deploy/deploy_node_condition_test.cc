// The Node's NeuronHealth condition in deploy/ (plugin/kubeapi/README.md#node-condition):
// overlays/node-condition adds dra-api (--slices=false) to the device-plugin DaemonSet, the only
// container with a token, while the base stays without API credentials; its RBAC is the least
// the condition needs; and the admission policy both overlays ship (components/node-condition)
// matches neuron-dra-api's service account as the DaemonSet names it, and keeps its writes of
// Node status and Events to the node its token is bound to. Every rule and every container says
// why in a comment. What the policy decides, evaluated, is tested against the API stand-in
// (tests/driver-sim/apiserver_admission_test.cc).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/deploy/deploy_testing.h"

namespace neuron::deploy_testing {
namespace {

// The containers of `pod` that mount a volume holding a service-account token.
std::set<std::string> TokenHolders(const YAML::Node& pod) {
  std::set<std::string> volumes;
  for (const YAML::Node& v : pod["volumes"]) {
    if (!v["projected"]) continue;
    for (const YAML::Node& source : v["projected"]["sources"]) {
      if (source["serviceAccountToken"]) volumes.insert(v["name"].as<std::string>());
    }
  }
  std::set<std::string> holders;
  for (const YAML::Node& c : pod["containers"]) {
    if (!c["volumeMounts"]) continue;
    for (const YAML::Node& m : c["volumeMounts"]) {
      if (volumes.count(m["name"].as<std::string>())) holders.insert(c["name"].as<std::string>());
    }
  }
  return holders;
}

TEST(DeployTest, NodeConditionOverlayGivesTheTokenToDraApiAlone) {
  ASSERT_TRUE(OnPath("kubectl")) << Missing("kubectl");
  const std::vector<YAML::Node> objects = Render(std::string(kNodeConditionOverlay));
  const YAML::Node ds = Find(objects, "DaemonSet");
  ASSERT_TRUE(ds);
  const YAML::Node pod = ds["spec"]["template"]["spec"];
  EXPECT_EQ(Arg(Container(ds, "device-plugin"), "--api"), "") << "the device-plugin API";
  const YAML::Node api = Container(ds, "dra-api");
  ASSERT_TRUE(api);
  ExpectUnprivileged(api);
  EXPECT_FALSE(api["ports"]);
  EXPECT_EQ(Arg(api, "--slices"), "false") << "no ResourceSlice in the device-plugin API";
  EXPECT_EQ(Arg(api, "--node-condition"), "") << "the condition is on by default";
  EXPECT_EQ(Arg(api, "--plugin"), Arg(Container(ds, "device-plugin"), "--listen"));
  EXPECT_EQ(TokenHolders(pod), std::set<std::string>{"dra-api"});
  EXPECT_FALSE(pod["automountServiceAccountToken"].as<bool>(true));
  EXPECT_EQ(pod["serviceAccountName"].as<std::string>(""), "neuron-dra-api");
  const YAML::Node account = Find(objects, "ServiceAccount");
  ASSERT_TRUE(account);
  EXPECT_FALSE(account["automountServiceAccountToken"].as<bool>(true));

  // The base alone: no account of its own, no token anywhere.
  const YAML::Node base = Find(Render("base"), "DaemonSet");
  ASSERT_TRUE(base);
  const YAML::Node base_pod = base["spec"]["template"]["spec"];
  EXPECT_FALSE(base_pod["automountServiceAccountToken"].as<bool>(true));
  EXPECT_FALSE(base_pod["serviceAccountName"]);
  EXPECT_TRUE(TokenHolders(base_pod).empty());
  EXPECT_TRUE(Container(base, "dra-api").IsNull()) << "no dra-api in the base";
}

TEST(DeployTest, NodeConditionRbacIsTheLeastTheConditionNeeds) {
  ASSERT_TRUE(OnPath("kubectl")) << Missing("kubectl");
  const std::vector<YAML::Node> objects = Render(std::string(kNodeConditionOverlay));
  const YAML::Node role = Find(objects, "ClusterRole");
  ASSERT_TRUE(role);
  const std::map<std::string, std::set<std::string>> expected = {
      {"/nodes", {"get"}}, {"/nodes/status", {"patch"}}, {"/events", {"create"}}};
  EXPECT_EQ(RuleVerbs(role), expected);
  const YAML::Node lease = Find(objects, "Role");
  ASSERT_TRUE(lease);
  EXPECT_EQ(RuleVerbs(lease), (std::map<std::string, std::set<std::string>>{
                                  {"coordination.k8s.io/leases", {"get", "create", "update"}}}));
  for (const char* kind : {"ClusterRoleBinding", "RoleBinding"}) {
    const YAML::Node binding = Find(objects, kind);
    ASSERT_TRUE(binding) << kind;
    ASSERT_EQ(binding["subjects"].size(), 1u);
    EXPECT_EQ(binding["subjects"][0]["name"].as<std::string>(), "neuron-dra-api");
  }
}

// The policy of both overlays: one binding that denies, a match on the username of the service
// account the DaemonSet runs as (in the namespace it renders into), and validations that compare
// the token's node with the Node written and the Node an Event is about. What it matches is what
// the ClusterRole lets neuron-dra-api write of Nodes and Events: a patch is an UPDATE.
void ExpectOwnNodePolicy(const std::string& overlay) {
  SCOPED_TRACE(overlay);
  const std::vector<YAML::Node> objects = Render(overlay);
  const YAML::Node policy = Find(objects, "ValidatingAdmissionPolicy");
  const YAML::Node binding = Find(objects, "ValidatingAdmissionPolicyBinding");
  const YAML::Node ds = Find(objects, "DaemonSet");
  ASSERT_TRUE(policy && binding && ds);
  EXPECT_EQ(policy["apiVersion"].as<std::string>(), "admissionregistration.k8s.io/v1");
  EXPECT_EQ(binding["spec"]["policyName"].as<std::string>(),
            policy["metadata"]["name"].as<std::string>());
  EXPECT_EQ(binding["spec"]["validationActions"].as<std::vector<std::string>>(),
            std::vector<std::string>{"Deny"});
  EXPECT_EQ(policy["spec"]["failurePolicy"].as<std::string>(""), "Fail");
  const std::string user =
      "system:serviceaccount:" + ds["metadata"]["namespace"].as<std::string>() + ":" +
      ds["spec"]["template"]["spec"]["serviceAccountName"].as<std::string>();
  ASSERT_EQ(policy["spec"]["matchConditions"].size(), 1u);
  EXPECT_EQ(policy["spec"]["matchConditions"][0]["expression"].as<std::string>(),
            "request.userInfo.username == '" + user + "'");
  std::map<std::string, std::set<std::string>> matched;  // "/resource" -> operations
  for (const YAML::Node& rule : policy["spec"]["matchConstraints"]["resourceRules"]) {
    EXPECT_EQ(rule["apiGroups"].as<std::vector<std::string>>(), std::vector<std::string>{""});
    for (const YAML::Node& r : rule["resources"]) {
      for (const YAML::Node& op : rule["operations"]) {
        matched["/" + r.as<std::string>()].insert(op.as<std::string>());
      }
    }
  }
  const auto granted = RuleVerbs(Find(objects, "ClusterRole"));
  EXPECT_TRUE(granted.at("/nodes/status").count("patch") &&
              matched["/nodes/status"].count("UPDATE"));
  EXPECT_TRUE(granted.at("/events").count("create") && matched["/events"].count("CREATE"));
  std::string validations;
  for (const YAML::Node& v : policy["spec"]["validations"]) {
    validations += v["expression"].as<std::string>() + "\n";
    EXPECT_EQ(v["reason"].as<std::string>(""), "Forbidden");
    EXPECT_FALSE(v["message"].as<std::string>("").empty());
  }
  for (const std::string want :
       {"request.userInfo.extra['authentication.kubernetes.io/node-name'][0] == "
        "object.metadata.name",
        "request.userInfo.extra['authentication.kubernetes.io/node-name'][0] == "
        "object.involvedObject.name",
        "object.involvedObject.kind == 'Node'"}) {
    EXPECT_NE(validations.find(want), std::string::npos) << want << " not in " << validations;
  }
}

TEST(DeployTest, TheAdmissionPolicyKeepsNodeWritesToTheTokensNode) {
  ASSERT_TRUE(OnPath("kubectl")) << Missing("kubectl");
  ExpectOwnNodePolicy(std::string(kNodeConditionOverlay));
  ExpectOwnNodePolicy(std::string(kDraOverlay));
}

// Each rule of the roles and of the policy, and each container of the overlay's patch, has its
// reason in a comment on the line above.
TEST(DeployTest, EveryPermissionAndContainerSaysWhy) {
  const std::vector<std::pair<std::string, std::string>> files = {
      {"overlays/node-condition/rbac.yaml", "- apiGroups:"},
      {"overlays/dra/rbac.yaml", "- apiGroups:"},
      {"components/node-condition/admission.yaml", "- apiGroups:"},
      {"overlays/node-condition/daemonset-node-condition.yaml", "- --"},
      {"overlays/node-condition/daemonset-node-condition.yaml", "securityContext:"}};
  for (const auto& [file, item] : files) {
    std::ifstream in(kDeploy / file);
    ASSERT_TRUE(in) << file;
    std::string line, previous;
    int items = 0;
    while (std::getline(in, line)) {
      const size_t text = line.find_first_not_of(' ');
      if (text != std::string::npos && line.compare(text, item.size(), item) == 0) {
        ++items;
        EXPECT_NE(previous.find('#'), std::string::npos) << file << ": no reason above: " << line;
      }
      previous = line;
    }
    EXPECT_GT(items, 0) << file << " has no " << item;
  }
}

}  // namespace
}  // namespace neuron::deploy_testing
