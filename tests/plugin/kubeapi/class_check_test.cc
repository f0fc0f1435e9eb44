// neuron-dra-api's check of the cluster's DeviceClass neuron.aws.com (plugin/kubeapi/
// class_check.h) against the API stand-in: AWS's class (driver alone) selects the NeuronCores of
// a --dra.partitionable pool, the overlay's does not, and what cannot be decided is said to be
// unknown, never fine.

#include "plugin/kubeapi/class_check.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "driver-sim/controlplane/api_server.h"
#include "plugin/kubeapi/client.h"
#include "tests/http/captured_log.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace neuron::kubeapi {
namespace {

using nlohmann::json;
using sim::apiserver::ApiServer;

constexpr char kClasses[] = "/apis/resource.k8s.io/v1/deviceclasses";

json ClassDevice(const std::string& name, const std::string& resource_type) {
  return {{"name", name},
          {"attributes",
           {{"resourceType", {{"string", resource_type}}},
            {"resource.aws.com/devicegroup4_id", {{"int", 0}}},
            {"neuronDriverVersion", {{"version", "2.24.7"}}}}}};
}

// The document's neuron.aws.com slices: a Neuron device, then (with `cores`) two NeuronCores.
std::vector<json> ClassCheckSlices(bool cores) {
  std::vector<json> slices = {
      {{"driver", "neuron.aws.com"}, {"devices", {ClassDevice("neuron-0", "neuron_device")}}}};
  if (cores) {
    slices.push_back({{"driver", "neuron.aws.com"},
                      {"devices",
                       {ClassDevice("neuroncore-0", "neuron_core"),
                        ClassDevice("neuroncore-1", "neuron_core")}}});
  }
  return slices;
}

json DeviceClass(const std::vector<std::string>& expressions) {
  json selectors = json::array();
  for (const std::string& e : expressions) selectors.push_back({{"cel", {{"expression", e}}}});
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "DeviceClass"},
          {"metadata", {{"name", "neuron.aws.com"}}},
          {"spec", {{"selectors", selectors}}}};
}

json YamlToJson(const YAML::Node& n) {
  if (n.IsMap()) {
    json o = json::object();
    for (const auto& kv : n) o[kv.first.as<std::string>()] = YamlToJson(kv.second);
    return o;
  }
  if (n.IsSequence()) {
    json a = json::array();
    for (const auto& item : n) a.push_back(YamlToJson(item));
    return a;
  }
  return n.as<std::string>();  // DeviceClasses hold only strings
}

// The overlay's DeviceClass neuron.aws.com, as deploy/overlays/dra/deviceclasses.yaml has it.
json OverlayClass() {
  for (const YAML::Node& doc : YAML::LoadAllFromFile(std::string(NEURON_SOURCE_DIR) +
                                                     "/deploy/overlays/dra/deviceclasses.yaml")) {
    json c = YamlToJson(doc);
    if (c["metadata"]["name"] == "neuron.aws.com") return c;
  }
  return json();
}

class ClassCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    neuron::testing::WriteFile(dir_.path() / "token", "t\n");
    ApiServer::Options o;
    o.cert_dir = dir_.str();
    o.tokens = {"t"};
    api_ = *ApiServer::Start(o);
    client_ = std::make_unique<Client>(
        ClientConfig{api_->url(), (dir_.path() / "token").string(), api_->ca_file(),
                     std::chrono::milliseconds(2000), std::chrono::milliseconds(500)});
  }
  void Install(const json& device_class) {
    ASSERT_TRUE(client_->Post(kClasses, device_class).ok());
  }

  neuron::testing::CapturedLog log_{"dra-api.class"};  // before the check takes its logger
  neuron::testing::TempDir dir_;
  std::unique_ptr<ApiServer> api_;
  std::unique_ptr<Client> client_;
};

TEST_F(ClassCheckTest, AwsClassSelectsTheCoresSaidOnceAsAnError) {
  Install(DeviceClass({"device.driver == \"neuron.aws.com\""}));
  ClassCheck check(*client_, std::chrono::seconds(60));
  check.Observe(ClassCheckSlices(/*cores=*/true), /*due=*/true);
  EXPECT_EQ(check.verdict(), ClassVerdict::kSelectsCores);
  EXPECT_EQ(check.gets(), 1u);
  const std::string said =
      "DeviceClass neuron.aws.com selects NeuronCores (its selectors: `device.driver == "
      "\"neuron.aws.com\"`; they select neuroncore-0): with --dra.partitionable a request of that "
      "class may get cores, and AWS's All-mode or count templates find no allocation";
  EXPECT_EQ(log_.Count(said), 1);
  EXPECT_EQ(log_.Count("[error]"), 1);
  // The publisher's rounds between resyncs (same kinds) read nothing; a resync reads again and
  // says nothing new.
  check.Observe(ClassCheckSlices(/*cores=*/true), /*due=*/false);
  EXPECT_EQ(check.gets(), 1u);
  check.Observe(ClassCheckSlices(/*cores=*/true), /*due=*/true);
  EXPECT_EQ(check.gets(), 2u);
  EXPECT_EQ(log_.Count(said), 1);
}

TEST_F(ClassCheckTest, TheOverlaysClassIsFine) {
  const json overlay = OverlayClass();
  ASSERT_FALSE(overlay.is_null());
  Install(overlay);
  ClassCheck check(*client_, std::chrono::seconds(60));
  check.Observe(ClassCheckSlices(/*cores=*/true), /*due=*/true);
  EXPECT_EQ(check.verdict(), ClassVerdict::kFine);
  EXPECT_EQ(log_.Count("DeviceClass neuron.aws.com does not select NeuronCores"), 1);
  EXPECT_EQ(log_.Count("it selects neuron-0"), 1);
}

TEST_F(ClassCheckTest, NoClassIsAbsent) {
  ClassCheck check(*client_, std::chrono::seconds(60));
  check.Observe(ClassCheckSlices(/*cores=*/true), /*due=*/true);
  EXPECT_EQ(check.verdict(), ClassVerdict::kAbsent);
  EXPECT_EQ(log_.Count("no DeviceClass neuron.aws.com in the cluster"), 1);
}

// CEL outside the subset, or a selector that fails on the core, cannot be judged: unknown, and
// the warning names the construct.
TEST_F(ClassCheckTest, WhatTheSubsetCannotDecideIsUnknown) {
  Install(DeviceClass({"device.attributes[\"neuron.aws.com\"].resourceType.matches(\"^neuron\")"}));
  ClassCheck check(*client_, std::chrono::seconds(60));
  check.Observe(ClassCheckSlices(/*cores=*/true), /*due=*/true);
  EXPECT_EQ(check.verdict(), ClassVerdict::kUnknown);
  EXPECT_EQ(log_.Count("cannot tell whether DeviceClass neuron.aws.com selects NeuronCores"), 1);
  EXPECT_EQ(log_.Count("matches"), 1);
  EXPECT_EQ(log_.Count("is outside the CEL subset"), 1);
  EXPECT_EQ(log_.Count("[warning]"), 1);
}

TEST_F(ClassCheckTest, ASelectorFailingOnTheCoreIsUnknown) {
  // The core has no attribute `lnc`: a CEL runtime error, which fails kube-scheduler's allocation.
  Install(DeviceClass({"device.attributes[\"neuron.aws.com\"].lnc == 2"}));
  ClassCheck check(*client_, std::chrono::seconds(60));
  check.Observe(ClassCheckSlices(/*cores=*/true), /*due=*/true);
  EXPECT_EQ(check.verdict(), ClassVerdict::kUnknown);
  // A selector that excludes the core first decides it, as the allocator's order does.
  EXPECT_EQ(JudgeDeviceClass(DeviceClass({"device.attributes[\"neuron.aws.com\"].resourceType == "
                                          "\"neuron_device\"",
                                          "device.attributes[\"neuron.aws.com\"].lnc == 2"}),
                             ClassCheckSlices(/*cores=*/true))
                .verdict,
            ClassVerdict::kFine);
}

TEST_F(ClassCheckTest, ADocumentWithoutCoresReadsNoClass) {
  Install(DeviceClass({"device.driver == \"neuron.aws.com\""}));
  ClassCheck check(*client_, std::chrono::seconds(60));
  check.Observe(ClassCheckSlices(/*cores=*/false), /*due=*/true);
  check.Observe(ClassCheckSlices(/*cores=*/false), /*due=*/true);
  EXPECT_EQ(check.verdict(), ClassVerdict::kNotChecked);
  EXPECT_EQ(check.gets(), 0u);
  // Cores appear (the kinds change): checked at once, not at the next resync.
  check.Observe(ClassCheckSlices(/*cores=*/true), /*due=*/false);
  EXPECT_EQ(check.verdict(), ClassVerdict::kSelectsCores);
  EXPECT_EQ(check.gets(), 1u);
}

// RBAC without deviceclasses get (the stand-in grants every read, so the answer is given).
TEST(ClassCheckJudge, ForbiddenIsUnknownNamingTheRule) {
  const ClassFinding f = JudgeDeviceClass(absl::PermissionDeniedError("deviceclasses is forbidden"),
                                          ClassCheckSlices(/*cores=*/true));
  EXPECT_EQ(f.verdict, ClassVerdict::kUnknown);
  EXPECT_NE(f.message.find("RBAC does not let neuron-dra-api get deviceclasses"), std::string::npos)
      << f.message;
  EXPECT_NE(f.message.find("cannot be made"), std::string::npos) << f.message;
}

// Unqualified attributes are in the driver's domain; each value typed as the slice types it.
TEST(ClassCheckJudge, DeviceViewOfASliceDevice) {
  const cel::DeviceView v =
      DeviceViewOf(ClassDevice("neuroncore-0", "neuron_core"), "neuron.aws.com");
  EXPECT_EQ(v.driver, "neuron.aws.com");
  EXPECT_EQ(std::get<std::string>(v.attributes.at("neuron.aws.com").at("resourceType")),
            "neuron_core");
  EXPECT_EQ(std::get<int64_t>(v.attributes.at("resource.aws.com").at("devicegroup4_id")), 0);
  EXPECT_EQ(std::get<cel::Semver>(v.attributes.at("neuron.aws.com").at("neuronDriverVersion")),
            (cel::Semver{.major = 2, .minor = 24, .patch = 7, .prerelease = ""}));
}

}  // namespace
}  // namespace neuron::kubeapi
