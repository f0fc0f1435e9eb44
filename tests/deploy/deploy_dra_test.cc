// deploy/overlays/dra (docs/OPERATIONS.md#dra): the plugin in DRA mode, dra-api unprivileged and
// the only container with the service account's token, the least RBAC neuron-dra-api needs, and
// AWS's DeviceClass selection beside ours for EFA and NeuronCores. The overlay also passes every
// check of the base (deploy_test.cc's OverlayTest).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/deploy/deploy_testing.h"

namespace neuron::deploy_testing {
namespace {

// DRA mode: the plugin serves the kubelet's DRA API, and dra-api, unprivileged, is the only
// container with a service-account token, mounted into it alone.
TEST(DeployTest, DraOverlayGivesTheApiTokenToDraApiAlone) {
  ASSERT_TRUE(OnPath("kubectl")) << Missing("kubectl");
  const std::vector<YAML::Node> objects = Render(std::string(kDraOverlay));
  const YAML::Node ds = Find(objects, "DaemonSet");
  ASSERT_TRUE(ds);
  const YAML::Node pod = ds["spec"]["template"]["spec"];
  EXPECT_EQ(Arg(Container(ds, "device-plugin"), "--api"), "dra");
  const YAML::Node api = Container(ds, "dra-api");
  ASSERT_TRUE(api);
  ExpectUnprivileged(api);
  EXPECT_FALSE(api["ports"]) << "dra-api listens on a Unix socket only";
  EXPECT_EQ(Arg(api, "--plugin"), Arg(Container(ds, "device-plugin"), "--listen"));
  EXPECT_EQ(Arg(api, "--listen").rfind("unix:/run/neuron-node-agent/", 0), 0u);
  for (const std::string name : {"device-plugin", "dra-api"}) {
    bool node_name = false;
    ASSERT_TRUE(Container(ds, name)["env"]) << name;
    for (const YAML::Node& e : Container(ds, name)["env"]) {
      node_name |= e["name"].as<std::string>() == "NODE_NAME" &&
                   e["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>("") == "spec.nodeName";
    }
    EXPECT_TRUE(node_name) << name << " is not told its node's name";
  }
  // The token's volume, and who mounts it.
  std::set<std::string> token_volumes;
  for (const YAML::Node& v : pod["volumes"]) {
    if (!v["projected"]) continue;
    for (const YAML::Node& source : v["projected"]["sources"]) {
      if (source["serviceAccountToken"]) token_volumes.insert(v["name"].as<std::string>());
    }
  }
  ASSERT_EQ(token_volumes.size(), 1u);
  std::set<std::string> holders;  // containers that mount the token
  for (const YAML::Node& c : pod["containers"]) {
    if (!c["volumeMounts"]) continue;
    for (const YAML::Node& m : c["volumeMounts"]) {
      if (token_volumes.count(m["name"].as<std::string>())) {
        holders.insert(c["name"].as<std::string>());
      }
    }
  }
  EXPECT_EQ(holders, std::set<std::string>{"dra-api"});
  EXPECT_EQ(pod["serviceAccountName"].as<std::string>(""), "neuron-dra-api");
  const YAML::Node account = Find(objects, "ServiceAccount");
  ASSERT_TRUE(account);
  EXPECT_FALSE(account["automountServiceAccountToken"].as<bool>(true));
}

// The least the API server must allow dra-api, and nothing wider.
// Rolling updates surge (docs/kubelet-api.md#dra-upgrades): the new pod starts beside the old one
// and its plugin's sockets carry its pod UID, so the node is never without a DRA plugin.
TEST(DeployTest, DraOverlaySurgesWithSocketsNamedPerPod) {
  ASSERT_TRUE(OnPath("kubectl")) << Missing("kubectl");
  const YAML::Node ds = Find(Render(std::string(kDraOverlay)), "DaemonSet");
  ASSERT_TRUE(ds);
  const YAML::Node rolling = ds["spec"]["updateStrategy"]["rollingUpdate"];
  EXPECT_EQ(rolling["maxSurge"].as<int>(0), 1);
  EXPECT_EQ(rolling["maxUnavailable"].as<int>(1), 0);
  bool pod_uid = false;
  for (const YAML::Node& e : Container(ds, "device-plugin")["env"]) {
    pod_uid |= e["name"].as<std::string>() == "POD_UID" &&
               e["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>("") == "metadata.uid";
  }
  EXPECT_TRUE(pod_uid) << "the plugin's sockets would not be its own";
}

TEST(DeployTest, DraRbacIsTheLeastTheDriverNeeds) {
  ASSERT_TRUE(OnPath("kubectl")) << Missing("kubectl");
  const std::vector<YAML::Node> objects = Render(std::string(kDraOverlay));
  const YAML::Node role = Find(objects, "ClusterRole");
  ASSERT_TRUE(role);
  const std::map<std::string, std::set<std::string>> expected = {
      {"resource.k8s.io/resourceslices", {"get", "list", "create", "update", "delete"}},
      {"resource.k8s.io/resourceclaims", {"get"}},
      {"resource.k8s.io/deviceclasses", {"get"}},
      {"/nodes", {"get"}},
      {"/nodes/status", {"patch"}},
      {"/events", {"create"}}};
  EXPECT_EQ(RuleVerbs(role), expected);
  const YAML::Node binding = Find(objects, "ClusterRoleBinding");
  ASSERT_TRUE(binding);
  EXPECT_EQ(binding["roleRef"]["name"].as<std::string>(),
            role["metadata"]["name"].as<std::string>());
  ASSERT_EQ(binding["subjects"].size(), 1u);
  EXPECT_EQ(binding["subjects"][0]["name"].as<std::string>(), "neuron-dra-api");
  EXPECT_EQ(binding["subjects"][0]["namespace"].as<std::string>(), "neuron-system");
}

// The two dra-api containers of a rolling update take turns writing slices through a Lease
// (plugin/kubeapi/README.md#one-writer): each knows its pod (the holder's identity) and
// namespace (the lease's), and a Role in that namespace lets it get, create and update leases,
// nothing more and nowhere else.
TEST(DeployTest, DraApiHoldsTheNodesLeaseWithItsPodsIdentity) {
  ASSERT_TRUE(OnPath("kubectl")) << Missing("kubectl");
  const std::vector<YAML::Node> objects = Render(std::string(kDraOverlay));
  const YAML::Node ds = Find(objects, "DaemonSet");
  ASSERT_TRUE(ds);
  const YAML::Node api = Container(ds, "dra-api");
  ASSERT_TRUE(api);
  std::map<std::string, std::string> fields;  // env name -> downward API field
  for (const YAML::Node& e : api["env"]) {
    fields[e["name"].as<std::string>()] =
        e["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>("");
  }
  EXPECT_EQ(fields["POD_NAME"], "metadata.name");
  EXPECT_EQ(fields["POD_NAMESPACE"], "metadata.namespace");
  EXPECT_EQ(fields["POD_UID"], "metadata.uid");
  EXPECT_EQ(Arg(api, "--lease"), "") << "the lease is on in the DaemonSet";

  const YAML::Node role = Find(objects, "Role");
  ASSERT_TRUE(role);
  const std::string ns = ds["metadata"]["namespace"].as<std::string>();
  EXPECT_EQ(role["metadata"]["namespace"].as<std::string>(""), ns);
  ASSERT_EQ(role["rules"].size(), 1u);
  const YAML::Node rule = role["rules"][0];
  EXPECT_EQ(rule["apiGroups"].as<std::vector<std::string>>(),
            std::vector<std::string>{"coordination.k8s.io"});
  EXPECT_EQ(rule["resources"].as<std::vector<std::string>>(), std::vector<std::string>{"leases"});
  const auto verbs = rule["verbs"].as<std::vector<std::string>>();
  EXPECT_EQ(std::set<std::string>(verbs.begin(), verbs.end()),
            (std::set<std::string>{"get", "create", "update"}));
  const YAML::Node binding = Find(objects, "RoleBinding");
  ASSERT_TRUE(binding);
  EXPECT_EQ(binding["metadata"]["namespace"].as<std::string>(""), ns);
  EXPECT_EQ(binding["roleRef"]["kind"].as<std::string>(), "Role");
  EXPECT_EQ(binding["roleRef"]["name"].as<std::string>(),
            role["metadata"]["name"].as<std::string>());
  ASSERT_EQ(binding["subjects"].size(), 1u);
  EXPECT_EQ(binding["subjects"][0]["name"].as<std::string>(),
            ds["spec"]["template"]["spec"]["serviceAccountName"].as<std::string>());
  EXPECT_EQ(binding["subjects"][0]["namespace"].as<std::string>(), ns);
}

// AWS's DeviceClass name and selection, so its claim templates work unchanged; ours for EFA.
TEST(DeployTest, DraDeviceClassesSelectAwsResourceTypesAndEfa) {
  ASSERT_TRUE(OnPath("kubectl")) << Missing("kubectl");
  std::map<std::string, std::string> expressions;
  for (const YAML::Node& o : Render(std::string(kDraOverlay))) {
    if (o["kind"].as<std::string>() != "DeviceClass") continue;
    EXPECT_EQ(o["apiVersion"].as<std::string>(), "resource.k8s.io/v1");
    ASSERT_EQ(o["spec"]["selectors"].size(), 1u);
    expressions[o["metadata"]["name"].as<std::string>()] =
        o["spec"]["selectors"][0]["cel"]["expression"].as<std::string>();
  }
  ASSERT_EQ(expressions.size(), 3u);
  const std::string& neuron = expressions["neuron.aws.com"];
  for (const std::string want : {"device.driver == \"neuron.aws.com\"", "\"neuron_device\"",
                                 "\"neuron_node\"", "resourceType"}) {
    EXPECT_NE(neuron.find(want), std::string::npos) << want << " not in " << neuron;
  }
  EXPECT_EQ(neuron.find("neuron_core"), std::string::npos) << "AWS's class takes no cores";
  // The EFAs are the devices of a driver of their own, never of neuron.aws.com.
  const std::string& efa = expressions["efa.neuron.aws.com"];
  EXPECT_NE(efa.find("device.driver == \"efa.neuron.aws.com\""), std::string::npos) << efa;
  EXPECT_NE(efa.find("resourceType == \"efa\""), std::string::npos) << efa;
  const std::string& cores = expressions["neuroncore.neuron.aws.com"];
  EXPECT_NE(cores.find("device.driver == \"neuron.aws.com\""), std::string::npos) << cores;
  EXPECT_NE(cores.find("resourceType == \"neuron_core\""), std::string::npos) << cores;
}

// NeuronCores are opt-in: the flag is there, commented, beside the feature gate it needs and
// the gate's stage by Kubernetes version; the rendered DaemonSet does not pass it.
TEST(DeployTest, DraPartitionableIsACommentedFlagNamingItsGate) {
  ASSERT_TRUE(OnPath("kubectl")) << Missing("kubectl");
  const std::string patch = testing::ReadFile(kDeploy / kDraOverlay / "daemonset-dra.yaml");
  const size_t flag = patch.find("# - --dra.partitionable=true");
  ASSERT_NE(flag, std::string::npos) << patch;
  const size_t why = patch.rfind("DRAPartitionableDevices", flag);
  ASSERT_NE(why, std::string::npos) << "the why comes before the flag";
  const std::string comment = patch.substr(why, flag - why);
  for (const std::string want : {"1.33", "1.36", "alpha", "beta"}) {
    EXPECT_NE(comment.find(want), std::string::npos) << want << " not in " << comment;
  }
  EXPECT_LT(patch.find("--dra.taint-effect"), flag) << "where the taint-effect one is";
  const YAML::Node ds = Find(Render(std::string(kDraOverlay)), "DaemonSet");
  ASSERT_TRUE(ds);
  EXPECT_EQ(Args(Container(ds, "device-plugin")).find("partitionable"), std::string::npos);
}

}  // namespace
}  // namespace neuron::deploy_testing
