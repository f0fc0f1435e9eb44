// The API stand-in's validation, one documented rule at a time (driver-sim/apiserver/
// validation.cc cites each), and its store: resourceVersion conflicts, selectors, watch history.

#include <gtest/gtest.h>

#include <string>

#include "driver-sim/apiserver/store.h"
#include "driver-sim/apiserver/validation.h"

namespace neuron::sim::apiserver {
namespace {

using nlohmann::json;

json Slice(json devices) {
  return {{"metadata", {{"name", "node-1-neuron.aws.com"}}},
          {"spec",
           {{"driver", "neuron.aws.com"},
            {"pool", {{"name", "node-1"}, {"generation", 1}, {"resourceSliceCount", 1}}},
            {"nodeName", "node-1"},
            {"devices", std::move(devices)}}}};
}

json Device(std::string name, json attributes = json::object()) {
  return {{"name", std::move(name)}, {"attributes", std::move(attributes)}};
}

// The fields of the errors, in order.
std::vector<std::string> Fields(const json& object) {
  std::vector<std::string> out;
  for (const FieldError& e : Validate("ResourceSlice", object)) out.push_back(e.field);
  return out;
}

TEST(ApiValidation, AValidSliceHasNoErrors) {
  const json s =
      Slice({Device("neuron-0", {{"deviceId", {{"int", 0}}},
                                 {"resourceType", {{"string", "neuron_device"}}},
                                 {"neuronDriverVersion", {{"version", "2.25.4"}}},
                                 {"resource.aws.com/devicegroup4_id", {{"string", "g0"}}},
                                 {"healthy", {{"bool", true}}}})});
  EXPECT_TRUE(Validate("ResourceSlice", s).empty());
}

TEST(ApiValidation, NamesFollowDnsRules) {
  EXPECT_TRUE(IsDnsLabel("neuron-15"));
  EXPECT_FALSE(IsDnsLabel("Neuron-15"));
  EXPECT_FALSE(IsDnsLabel("-a"));
  EXPECT_FALSE(IsDnsLabel(std::string(64, 'a')));
  EXPECT_TRUE(IsDnsSubdomain("node-1.neuron.aws.com"));
  EXPECT_FALSE(IsDnsSubdomain("node_1"));
  EXPECT_FALSE(IsDnsSubdomain("a..b"));
  json bad_name = Slice(json::array());
  bad_name["metadata"]["name"] = "Node_1";
  EXPECT_EQ(Fields(bad_name), std::vector<std::string>{"metadata.name"});
  EXPECT_EQ(Fields(Slice({Device("efa-RDMAP16S27")})),
            std::vector<std::string>{"spec.devices[0].name"});
}

TEST(ApiValidation, AttributeNamesAreQualifiedCIdentifiers) {
  EXPECT_EQ(Fields(Slice({Device("d", {{"topology-x", {{"int", 1}}}})})),
            std::vector<std::string>{"spec.devices[0].attributes[topology-x]"});
  EXPECT_EQ(Fields(Slice({Device("d", {{std::string(33, 'a'), {{"int", 1}}}})})).size(), 1u);
  EXPECT_TRUE(Fields(Slice({Device("d", {{std::string(32, 'a'), {{"int", 1}}}})})).empty());
  EXPECT_EQ(Fields(Slice({Device("d", {{"Bad_Domain/x", {{"int", 1}}}})})).size(), 1u);
}

TEST(ApiValidation, OneValueTypePerAttribute) {
  const auto errors =
      Validate("ResourceSlice", Slice({Device("d", {{"a", {{"int", 1}, {"string", "x"}}}})}));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].message.find("exactly one value"), std::string::npos);
  EXPECT_EQ(Fields(Slice({Device("d", {{"a", json::object()}})})).size(), 1u);
}

TEST(ApiValidation, StringValuesAreAtMost64Characters) {
  EXPECT_TRUE(Fields(Slice({Device("d", {{"a", {{"string", std::string(64, 'x')}}}})})).empty());
  const auto errors =
      Validate("ResourceSlice", Slice({Device("d", {{"a", {{"string", std::string(65, 'x')}}}})}));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].reason, "FieldValueTooLong");
  EXPECT_EQ(errors[0].field, "spec.devices[0].attributes[a].string");
}

TEST(ApiValidation, VersionValuesAreSemver) {
  for (const char* ok : {"2.25.4", "1.0.0-rc.1", "1.0.0+build.5", "0.0.0"}) {
    EXPECT_TRUE(IsSemver(ok)) << ok;
  }
  for (const char* bad : {"2.25", "2.25.4.0", "01.0.0", "1.0.0-", "1.0.0-01", "v1.0.0", ""}) {
    EXPECT_FALSE(IsSemver(bad)) << bad;
  }
  EXPECT_EQ(Fields(Slice({Device("d", {{"v", {{"version", "2.25.4.0"}}}})})),
            std::vector<std::string>{"spec.devices[0].attributes[v].version"});
}

TEST(ApiValidation, AtMost128DevicesPerSlice) {
  json devices = json::array();
  for (int i = 0; i < 128; ++i) devices.push_back(Device("neuron-" + std::to_string(i)));
  EXPECT_TRUE(Fields(Slice(devices)).empty());
  devices.push_back(Device("neuron-128"));
  const auto errors = Validate("ResourceSlice", Slice(devices));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "spec.devices");
  EXPECT_EQ(errors[0].reason, "FieldValueTooMany");
}

TEST(ApiValidation, AtMost32AttributesAndCapacitiesPerDevice) {
  json attributes = json::object();
  for (int i = 0; i < 30; ++i) attributes["a" + std::to_string(i)] = {{"int", i}};
  json d = Device("d", attributes);
  d["capacity"] = {{"memory", {{"value", "32Gi"}}}, {"cores", {{"value", "2"}}}};
  EXPECT_TRUE(Fields(Slice({d})).empty());
  d["capacity"]["extra"] = {{"value", "1"}};
  EXPECT_EQ(Fields(Slice({d})), std::vector<std::string>{"spec.devices[0]"});
}

TEST(ApiValidation, TaintsNeedAKnownEffect) {
  json d = Device("d");
  d["taints"] = {{{"key", "neuron.aws.com/unhealthy"},
                  {"value", "hbm-uncorrectable"},
                  {"effect", "NoSchedule"}}};
  EXPECT_TRUE(Fields(Slice({d})).empty());
  d["taints"][0]["effect"] = "PreferNoSchedule";
  EXPECT_EQ(Fields(Slice({d})), std::vector<std::string>{"spec.devices[0].taints[0].effect"});
}

TEST(ApiValidation, ExactlyOneNodeSelection) {
  json s = Slice(json::array());
  s["spec"]["allNodes"] = true;
  EXPECT_EQ(Fields(s), std::vector<std::string>{"spec"});
  s["spec"].erase("allNodes");
  s["spec"].erase("nodeName");
  EXPECT_EQ(Fields(s), std::vector<std::string>{"spec"});
}

const Kind& Slices() { return *FindKind("/apis/resource.k8s.io/v1/", "resourceslices"); }

TEST(ApiStore, StaleResourceVersionIsAConflict) {
  Store store;
  const ApiAnswer made = store.Create(Slices(), "", Slice(json::array()));
  ASSERT_EQ(made.code, 201) << made.body.dump();
  json first = made.body;
  json second = made.body;
  first["spec"]["devices"] = {Device("neuron-0")};
  ASSERT_EQ(store.Update(Slices(), "", "node-1-neuron.aws.com", first, false).code, 200);
  second["spec"]["devices"] = {Device("neuron-1")};
  const ApiAnswer stale = store.Update(Slices(), "", "node-1-neuron.aws.com", second, false);
  EXPECT_EQ(stale.code, 409);
  EXPECT_EQ(stale.body["reason"], "Conflict");
  EXPECT_EQ(store.Create(Slices(), "", Slice(json::array())).body["reason"], "AlreadyExists");
  const ApiAnswer invalid = store.Create(Slices(), "", Slice({Device("BAD")}));
  EXPECT_EQ(invalid.code, 422);
  EXPECT_EQ(invalid.body["details"]["causes"][0]["field"], "spec.devices[0].name");
}

TEST(ApiStore, FieldSelectorsAndWatch) {
  Store store;
  const uint64_t start = std::stoull(
      store.List(Slices(), "", "", "").body["metadata"]["resourceVersion"].get<std::string>());
  ASSERT_EQ(store.Create(Slices(), "", Slice(json::array())).code, 201);
  json other = Slice(json::array());
  other["metadata"]["name"] = "node-2-neuron.aws.com";
  other["spec"]["nodeName"] = "node-2";
  ASSERT_EQ(store.Create(Slices(), "", other).code, 201);
  const ApiAnswer list =
      store.List(Slices(), "", "", "spec.nodeName=node-2,spec.driver=neuron.aws.com");
  ASSERT_EQ(list.body["items"].size(), 1u);
  EXPECT_EQ(list.body["items"][0]["metadata"]["name"], "node-2-neuron.aws.com");
  EXPECT_EQ(store.List(Slices(), "", "", "spec.color=red").code, 400);
  ASSERT_EQ(store.Delete(Slices(), "", "node-2-neuron.aws.com").code, 200);
  const ApiAnswer events =
      store.Watch(Slices(), "", start, "", "spec.nodeName=node-2", std::chrono::milliseconds(0));
  ASSERT_EQ(events.body.size(), 2u) << events.body.dump();
  EXPECT_EQ(events.body[0]["type"], "ADDED");
  EXPECT_EQ(events.body[1]["type"], "DELETED");
  // A watch from no resourceVersion starts with the objects there are.
  const ApiAnswer now = store.Watch(Slices(), "", 0, "", "", std::chrono::milliseconds(0));
  ASSERT_EQ(now.body.size(), 1u);
  EXPECT_EQ(now.body[0]["object"]["metadata"]["name"], "node-1-neuron.aws.com");
}

}  // namespace
}  // namespace neuron::sim::apiserver
