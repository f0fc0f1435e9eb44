// The API stand-in's Node status patches, Events and admission
// (driver-sim/controlplane/admission.h, patch.h), through the real client: the
// ValidatingAdmissionPolicy is the one deploy/ ships (components/node-condition/admission.yaml,
// read as the stand-in reads --admission), so what is proved here is the shipped policy. A token of
// neuron-dra-api bound to node-a writes node-a's status and Events about node-a, and is refused
// node-b's with the policy's message, as the real API server words it.

#include <gtest/gtest.h>

#include <string>

#include "driver-sim/controlplane/admission.h"
#include "driver-sim/controlplane/api_server.h"
#include "driver-sim/controlplane/patch.h"
#include "plugin/kubeapi/client.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace neuron::sim::apiserver {
namespace {

using nlohmann::json;

const std::string kPolicyFile =
    std::string(NEURON_SOURCE_DIR) + "/deploy/components/node-condition/admission.yaml";
const std::string kDenied =
    "ValidatingAdmissionPolicy 'neuron-dra-api-own-node' with binding 'neuron-dra-api-own-node' "
    "denied request: ";

json Condition(const std::string& status, const std::string& reason) {
  return {{"type", "NeuronHealth"}, {"status", status}, {"reason", reason}, {"message", "m"}};
}

json StatusPatch(const json& condition) {
  return {{"status", {{"conditions", json::array({condition})}}}};
}

json EventAbout(const std::string& kind, const std::string& name) {
  return {{"metadata", {{"name", name + ".1"}}},
          {"involvedObject", {{"kind", kind}, {"name", name}, {"apiVersion", "v1"}}},
          {"reason", "NeuronHasNoError"},
          {"type", "Normal"},
          {"source", {{"component", "neuron-dra-api"}, {"host", name}}}};
}

// The stand-in over plain HTTP with the shipped policy, nodes node-a and node-b, and tokens:
// "admin" (the stand-in's own), "sa-a" (neuron-dra-api bound to node-a), "other-sa" (another
// service account bound to node-a), "unbound" (neuron-dra-api without a node: not projected).
class ApiAdmissionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ApiServer::Options o;
    o.tls = false;
    o.tokens = {"admin"};
    o.service_account_tokens["sa-a"] =
        ServiceAccountUser("neuron-system", "neuron-dra-api", "node-a");
    o.service_account_tokens["other-sa"] = ServiceAccountUser("ml", "trainer", "node-a");
    o.service_account_tokens["unbound"] = {
        .username = "system:serviceaccount:neuron-system:neuron-dra-api"};
    absl::StatusOr<std::vector<json>> policy = LoadManifest(kPolicyFile);
    ASSERT_TRUE(policy.ok()) << policy.status();
    o.admission = *policy;
    absl::StatusOr<std::unique_ptr<ApiServer>> s = ApiServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    api_ = *std::move(s);
    for (const char* node : {"node-a", "node-b"}) {
      ASSERT_EQ(api_->store()
                    .Create(*FindKind("/api/v1/", "nodes"), "", {{"metadata", {{"name", node}}}})
                    .code,
                201);
    }
  }
  kubeapi::Client As(const std::string& token) {
    neuron::testing::WriteFile(dir_.path() / token, token + "\n");
    return kubeapi::Client({api_->url(), (dir_.path() / token).string(), ""});
  }
  absl::Status PatchStatus(const kubeapi::Client& c, const std::string& node,
                           const json& condition) {
    return c
        .Patch("/api/v1/nodes/" + node + "/status", StatusPatch(condition),
               kubeapi::kStrategicMergePatch)
        .status();
  }
  absl::Status PostEvent(const kubeapi::Client& c, const json& event) {
    return c.Post("/api/v1/namespaces/default/events", event).status();
  }

  neuron::testing::TempDir dir_;
  std::unique_ptr<ApiServer> api_;
};

TEST_F(ApiAdmissionTest, ATokenBoundToNodeAWritesNodeAAndNotNodeB) {
  const kubeapi::Client a = As("sa-a");
  EXPECT_TRUE(PatchStatus(a, "node-a", Condition("True", "NeuronHasError_DMA_ERROR")).ok());
  EXPECT_TRUE(PostEvent(a, EventAbout("Node", "node-a")).ok());

  const absl::Status node_b = PatchStatus(a, "node-b", Condition("True", "NeuronHasError_X"));
  EXPECT_TRUE(absl::IsPermissionDenied(node_b)) << node_b;  // 403: reason Forbidden
  EXPECT_NE(node_b.message().find(kDenied + "neuron-dra-api may write only the status of the "
                                            "Node its token is bound to"),
            std::string::npos)
      << node_b;
  const absl::Status event_b = PostEvent(a, EventAbout("Node", "node-b"));
  EXPECT_TRUE(absl::IsPermissionDenied(event_b)) << event_b;
  EXPECT_NE(event_b.message().find(kDenied + "neuron-dra-api may create only Events about the "
                                             "Node its token is bound to"),
            std::string::npos)
      << event_b;
  // Named node-a, but about a Pod: not an Event about its Node.
  EXPECT_TRUE(absl::IsPermissionDenied(PostEvent(a, EventAbout("Pod", "node-a"))));

  // Nothing of node-b changed, nothing about it was recorded.
  const json b = api_->store().Get(*FindKind("/api/v1/", "nodes"), "", "node-b").body;
  EXPECT_FALSE(b.contains("status")) << b.dump();
  EXPECT_EQ(api_->store().Get(*FindKind("/api/v1/", "events"), "default", "node-b.1").code, 404);
  const json a_node = api_->store().Get(*FindKind("/api/v1/", "nodes"), "", "node-a").body;
  EXPECT_EQ(a_node["status"]["conditions"][0]["reason"], "NeuronHasError_DMA_ERROR");
}

// The policy names neuron-dra-api's account only, and fails closed on a token without a node.
TEST_F(ApiAdmissionTest, OtherAccountsAreNotMatchedAndAnUnboundTokenIsRefused) {
  EXPECT_TRUE(PatchStatus(As("other-sa"), "node-b", Condition("False", "NeuronHasNoError")).ok());
  EXPECT_TRUE(PatchStatus(As("admin"), "node-b", Condition("False", "NeuronHasNoError")).ok());
  const absl::Status unbound = PatchStatus(As("unbound"), "node-a", Condition("False", "x"));
  EXPECT_TRUE(absl::IsPermissionDenied(unbound)) << unbound;
  EXPECT_NE(unbound.message().find(kDenied), std::string::npos) << unbound;
}

// A strategic-merge patch of status.conditions merges by type: the other conditions stay, the
// fields the patch leaves out stay. A merge patch replaces the list; a JSON patch is refused.
TEST_F(ApiAdmissionTest, StatusPatchesMergeConditionsByType) {
  const kubeapi::Client admin = As("admin");
  const std::string path = "/api/v1/nodes/node-a/status";
  json ready = {{"type", "Ready"}, {"status", "True"}, {"reason", "KubeletReady"}};
  ASSERT_TRUE(admin.Patch(path, StatusPatch(ready), kubeapi::kStrategicMergePatch).ok());
  json health = Condition("False", "NeuronHasNoError");
  health["lastTransitionTime"] = "2026-12-07T03:00:00Z";
  ASSERT_TRUE(admin.Patch(path, StatusPatch(health), kubeapi::kStrategicMergePatch).ok());
  absl::StatusOr<json> node =
      admin.Patch(path, StatusPatch(Condition("True", "NeuronHasError_DMA_ERROR")),
                  kubeapi::kStrategicMergePatch);
  ASSERT_TRUE(node.ok()) << node.status();
  const json& conditions = (*node)["status"]["conditions"];
  ASSERT_EQ(conditions.size(), 2u) << conditions.dump();
  EXPECT_EQ(conditions[0]["type"], "Ready");
  EXPECT_EQ(conditions[1]["reason"], "NeuronHasError_DMA_ERROR");
  EXPECT_EQ(conditions[1]["lastTransitionTime"], "2026-12-07T03:00:00Z");

  // A resourceVersion in the patch is a precondition.
  json stale = StatusPatch(health);
  stale["metadata"]["resourceVersion"] = "1";
  EXPECT_TRUE(absl::IsAborted(admin.Patch(path, stale, kubeapi::kStrategicMergePatch).status()));
  node = admin.Patch(path, StatusPatch(ready), kubeapi::kMergePatch);
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ((*node)["status"]["conditions"].size(), 1u);
  EXPECT_EQ(admin.Patch(path, StatusPatch(ready), "application/json-patch+json").status().message(),
            "PATCH /api/v1/nodes/node-a/status: HTTP 415: the body of the request was in an "
            "unknown format - accepted media types include: "
            "application/strategic-merge-patch+json, application/merge-patch+json (the API "
            "stand-in's patches)");
}

// A Node's Event lives in default (the API's event validation), and what the stand-in cannot
// evaluate of a policy is refused when loading, never ignored.
TEST_F(ApiAdmissionTest, EventsOfNodesLiveInDefaultAndUnmodelledPolicyFieldsAreRefused) {
  const absl::Status elsewhere =
      As("admin").Post("/api/v1/namespaces/ml/events", EventAbout("Node", "node-a")).status();
  EXPECT_TRUE(absl::IsInvalidArgument(elsewhere)) << elsewhere;
  EXPECT_NE(elsewhere.message().find("does not match event.namespace"), std::string::npos);

  absl::StatusOr<std::vector<json>> objects = LoadManifest(kPolicyFile);
  ASSERT_TRUE(objects.ok());
  ASSERT_EQ(AdmissionPolicies::Load(*objects)->size(), 1u);
  json with_params = (*objects)[0];
  with_params["spec"]["paramKind"] = {{"apiVersion", "v1"}, {"kind", "ConfigMap"}};
  EXPECT_EQ(AdmissionPolicies::Load({with_params}).status().message(),
            "ValidatingAdmissionPolicy neuron-dra-api-own-node: spec.paramKind is not evaluated "
            "by the API stand-in");
  json outside = (*objects)[0];
  outside["spec"]["validations"][0]["expression"] = "object.metadata.name.matches('^node-')";
  EXPECT_NE(AdmissionPolicies::Load({outside}).status().message().find("the method matches()"),
            std::string::npos);
  EXPECT_FALSE(LoadManifest(dir_.str() + "/missing.yaml").ok());
}

}  // namespace
}  // namespace neuron::sim::apiserver
