// The scheduler's allocate-and-write-status (driver-sim/controlplane/schedule.h) through the real
// client (plugin/kubeapi/client.h) against the API stand-in over HTTPS, with the DeviceClasses
// the DRA overlay deploys (deploy/overlays/dra/deviceclasses.yaml): claims allocated one after
// another never share a device, a concurrent writer's 409 is retried, and a claim the node
// cannot hold says why.
#include "driver-sim/controlplane/schedule.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <set>
#include <string>

#include "driver-sim/controlplane/api_server.h"
#include "driver-sim/controlplane/extended_resources.h"
#include "plugin/kubeapi/client.h"
#include "tests/driver-sim/dra_slice_fixture.h"
#include "tests/support/api_stand_in.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace neuron::sim::scheduler {
namespace {

using nlohmann::json;

constexpr char kApi[] = "/apis/resource.k8s.io/v1";

json ToJson(const YAML::Node& n) {
  if (n.IsMap()) {
    json o = json::object();
    for (const auto& kv : n) o[kv.first.as<std::string>()] = ToJson(kv.second);
    return o;
  }
  if (n.IsSequence()) {
    json a = json::array();
    for (const auto& item : n) a.push_back(ToJson(item));
    return a;
  }
  return n.as<std::string>();  // DeviceClasses hold only strings
}

json Claim(const std::string& name, int count) {
  json claim = {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceClaim"},
                {"metadata", {{"name", name}, {"namespace", "default"}}}};
  claim["spec"]["devices"]["requests"] = {{{"name", "neurons"},
                                           {"exactly",
                                            {{"deviceClassName", "neuron.aws.com"},
                                             {"allocationMode", "ExactCount"},
                                             {"count", count}}}}};
  claim["spec"]["devices"]["constraints"] = {
      {{"requests", {"neurons"}}, {"matchAttribute", "resource.aws.com/devicegroup4_id"}}};
  return claim;
}

class ScheduleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<apiserver::ApiServer>> s =
        neuron::testing::StartApiStandIn(dir_.path());
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    client_ =
        std::make_unique<kubeapi::Client>(neuron::testing::StandInClient(*server_, dir_.path()));
    for (const YAML::Node& doc : YAML::LoadAllFromFile(std::string(NEURON_SOURCE_DIR) +
                                                       "/deploy/overlays/dra/deviceclasses.yaml")) {
      ASSERT_TRUE(client_->Post(std::string(kApi) + "/deviceclasses", ToJson(doc)).ok());
    }
    ASSERT_TRUE(client_->Post(std::string(kApi) + "/resourceslices", Trn1Slice("node-a")).ok());
    api_.get = [this](const std::string& path) { return client_->Get(path); };
    api_.put = [this](const std::string& path, const json& body) {
      return client_->Put(path, body);
    };
  }

  absl::StatusOr<json> Schedule(const std::string& name, int count) {
    const absl::StatusOr<json> made =
        client_->Post(std::string(kApi) + "/namespaces/default/resourceclaims", Claim(name, count));
    if (!made.ok()) return made.status();
    return ScheduleClaim(api_, "default", name, "node-a");
  }

  static std::set<std::string> Devices(const json& claim) {
    std::set<std::string> out;
    for (const json& r : claim["status"]["allocation"]["devices"]["results"]) {
      out.insert(r["device"]);
    }
    return out;
  }

  neuron::testing::TempDir dir_;
  std::unique_ptr<apiserver::ApiServer> server_;
  std::unique_ptr<kubeapi::Client> client_;
  Api api_;
};

TEST_F(ScheduleTest, ClaimsAllocatedInTurnNeverShareADevice) {
  absl::StatusOr<json> first = Schedule("first", 4);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(Devices(*first),
            (std::set<std::string>{"neuron-0", "neuron-1", "neuron-2", "neuron-3"}));
  absl::StatusOr<json> stored =
      client_->Get(std::string(kApi) + "/namespaces/default/resourceclaims/first");
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(Devices(*stored), Devices(*first)) << "the allocation is in the API server";
  absl::StatusOr<json> second = Schedule("second", 4);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(Devices(*second),
            (std::set<std::string>{"neuron-4", "neuron-5", "neuron-6", "neuron-7"}));
  absl::StatusOr<json> again = ScheduleClaim(api_, "default", "first", "node-a");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(Devices(*again), Devices(*first)) << "an allocated claim stays as it is";
}

// Another writer updates the claim between the scheduler's read and its write: the stand-in
// answers 409, and the scheduler reads again and succeeds.
TEST_F(ScheduleTest, AConflictingWriteIsRetried) {
  int puts = 0;
  const auto put = api_.put;
  api_.put = [&](const std::string& path, const json& body) {
    if (puts++ == 0) {
      json other = *client_->Get(std::string(kApi) + "/namespaces/default/resourceclaims/racy");
      other["metadata"]["labels"]["touched"] = "yes";
      EXPECT_TRUE(
          client_->Put(std::string(kApi) + "/namespaces/default/resourceclaims/racy", other).ok());
    }
    return put(path, body);
  };
  absl::StatusOr<json> claim = Schedule("racy", 4);
  ASSERT_TRUE(claim.ok()) << claim.status();
  EXPECT_EQ(puts, 2) << "one 409, then success";
  EXPECT_EQ(Devices(*claim).size(), 4u);
  EXPECT_EQ((*claim)["metadata"]["labels"]["touched"], "yes") << "the other writer's edit is kept";
}

TEST_F(ScheduleTest, AClaimTheNodeCannotHoldSaysWhy) {
  absl::StatusOr<json> claim = Schedule("too-big", 5);
  EXPECT_EQ(claim.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(claim.status().message().find("constraints"), std::string::npos) << claim.status();
}

// A partitionable pool through the API server (three slices, the overlay's NeuronCore class):
// claims allocated in turn never put a core and its device in two claims.
TEST_F(ScheduleTest, CoresAndTheirDevicesAreNeverBothAllocated) {
  for (const json& slice : Trn1PartitionablePool("node-b")) {
    ASSERT_TRUE(client_->Post(std::string(kApi) + "/resourceslices", slice).ok());
  }
  const auto schedule = [&](const std::string& name, const char* cls, int count) {
    json claim = Claim(name, count);
    claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = cls;
    claim["spec"]["devices"].erase("constraints");
    const absl::StatusOr<json> made =
        client_->Post(std::string(kApi) + "/namespaces/default/resourceclaims", claim);
    return made.ok() ? ScheduleClaim(api_, "default", name, "node-b") : made;
  };
  absl::StatusOr<json> cores = schedule("cores", "neuroncore.neuron.aws.com", 2);
  ASSERT_TRUE(cores.ok()) << cores.status();
  EXPECT_EQ(Devices(*cores), (std::set<std::string>{"neuroncore-0", "neuroncore-1"}));
  absl::StatusOr<json> all = schedule("all", "neuron.aws.com", 16);
  EXPECT_EQ(all.status().message(),
            "request neurons: 15 matching free devices on node node-b, 16 needed");
  absl::StatusOr<json> one = schedule("one", "neuron.aws.com", 1);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(Devices(*one), std::set<std::string>{"neuron-1"});
  absl::StatusOr<json> more = schedule("more", "neuroncore.neuron.aws.com", 29);
  EXPECT_EQ(more.status().message(),
            "request neurons: 28 matching free devices on node node-b, 29 needed");
}

// KEP-5004: a pod asking aws.amazon.com/neuron: 4 on a node that no device plugin serves gets the
// scheduler's claim of class neuron.aws.com (the overlay's extendedResourceName), annotated, its
// request named after the container and the resource, and allocated.
TEST_F(ScheduleTest, AnExtendedResourceOfAClassGetsTheSchedulersClaim) {
  api_.post = [this](const std::string& path, const json& body) {
    return client_->Post(path, body);
  };
  (void)client_->Post("/api/v1/nodes", {{"metadata", {{"name", "node-a"}}}});
  const PodRequests pod{
      .name_space = "default",
      .name = "by-count",
      .containers = {{.name = "main",
                      .requests = {{"aws.amazon.com/neuron", 4}, {"vpc.amazonaws.com/efa", 0}}}}};
  std::mt19937_64 rng(1);
  absl::StatusOr<ExtendedResourceClaim> made = ScheduleExtendedResources(api_, pod, "node-a", rng);
  ASSERT_TRUE(made.ok()) << made.status();
  ASSERT_TRUE(made->claim.has_value());
  const json& claim = *made->claim;
  EXPECT_TRUE(
      claim["metadata"]["name"].get<std::string>().starts_with("by-count-extended-resources-"));
  EXPECT_EQ(claim["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"],
            "true");
  const json& request = claim["spec"]["devices"]["requests"][0];
  EXPECT_EQ(request["name"], "container-0-request-0");
  EXPECT_EQ(request["exactly"]["deviceClassName"], "neuron.aws.com");
  EXPECT_EQ(request["exactly"]["count"], 4);
  EXPECT_EQ(Devices(claim).size(), 4u);
  EXPECT_EQ(
      made->mappings,
      (std::vector<RequestMapping>{{"main", "aws.amazon.com/neuron", "container-0-request-0"}}));
}

// The node's device plugin serves the resource (allocatable): no claim, as the real scheduler.
// A resource neither allocatable nor named by a class does not fit; two classes naming one
// resource are refused rather than guessed between.
TEST(ExtendedResourcesTest, TheDevicePluginFirstThenAClassElseNoFit) {
  const std::map<std::string, std::string> classes = {
      {"aws.amazon.com/neuron", "neuron.aws.com"},
      {"deviceclass.resource.kubernetes.io/neuron.aws.com", "neuron.aws.com"}};
  PodRequests pod{
      .name_space = "default",
      .name = "p",
      .containers = {{.name = "init", .requests = {}},
                     {.name = "main",
                      .requests = {{"aws.amazon.com/neuron", 2},
                                   {"deviceclass.resource.kubernetes.io/neuron.aws.com", 1}}}}};
  absl::StatusOr<ExtendedRequests> by_plugin =
      PlanExtendedRequests(pod, classes, json{{"aws.amazon.com/neuron", "16"}});
  ASSERT_TRUE(by_plugin.ok()) << by_plugin.status();
  ASSERT_EQ(by_plugin->mappings.size(), 1u);  // the implicit name only
  EXPECT_EQ(by_plugin->mappings[0].request, "container-1-request-1");
  absl::StatusOr<ExtendedRequests> none =
      PlanExtendedRequests(pod, classes, json{{"aws.amazon.com/neuron", "0"}});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->mappings.size(), 2u);
  pod.containers[1].requests["example.com/gadget"] = 1;
  EXPECT_TRUE(
      absl::IsFailedPrecondition(PlanExtendedRequests(pod, classes, json::object()).status()));
  const absl::StatusOr<std::map<std::string, std::string>> twice = ExtendedResourceClasses(
      {{{"metadata", {{"name", "a"}}}, {"spec", {{"extendedResourceName", "x.com/r"}}}},
       {{"metadata", {{"name", "b"}}}, {"spec", {{"extendedResourceName", "x.com/r"}}}}});
  EXPECT_NE(twice.status().message().find("a and b both name extended resource x.com/r"),
            std::string::npos)
      << twice.status();
}

}  // namespace
}  // namespace neuron::sim::scheduler
