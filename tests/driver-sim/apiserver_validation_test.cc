// The API stand-in's validation, one documented rule at a time (driver-sim/controlplane/
// validation.cc cites each), and its store: resourceVersion conflicts, selectors, watch history,
// the defaulting of taint times and delete preconditions.

#include <gtest/gtest.h>

#include <string>

#include "absl/time/time.h"
#include "driver-sim/controlplane/quantity.h"
#include "driver-sim/controlplane/store.h"
#include "driver-sim/controlplane/validation.h"

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

// DeviceClassSpec.extendedResourceName (KEP-5004): a qualified name with a domain outside
// kubernetes.io.
TEST(ApiValidation, AnExtendedResourceNameIsQualifiedOutsideKubernetesIo) {
  auto errors = [](const json& name) {
    return Validate("DeviceClass",
                    {{"metadata", {{"name", "c"}}}, {"spec", {{"extendedResourceName", name}}}});
  };
  EXPECT_TRUE(errors("aws.amazon.com/neuron").empty());
  for (const json& bad :
       {json("neuron"), json("example.kubernetes.io/x"), json("a.com/b c"), json(4)}) {
    const std::vector<FieldError> e = errors(bad);
    ASSERT_EQ(e.size(), 1u) << bad;
    EXPECT_EQ(e[0].field, "spec.extendedResourceName");
  }
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
  // None from Kubernetes 1.35; before, the two others only.
  d["taints"][0]["effect"] = "None";
  EXPECT_TRUE(Fields(Slice({d})).empty());
  const std::vector<FieldError> old = Validate(
      "ResourceSlice", Slice({d}), {.partitionable_devices = true, .taint_effect_none = false});
  ASSERT_EQ(old.size(), 1u);
  EXPECT_EQ(old[0].message,
            "Unsupported value: \"None\": supported values: \"NoExecute\", \"NoSchedule\"");
}

TEST(ApiValidation, ExactlyOneNodeSelection) {
  json s = Slice(json::array());
  s["spec"]["allNodes"] = true;
  EXPECT_EQ(Fields(s), std::vector<std::string>{"spec"});
  s["spec"].erase("allNodes");
  s["spec"].erase("nodeName");
  EXPECT_EQ(Fields(s), std::vector<std::string>{"spec"});
}

// --- Partitionable devices (types.go, validation.go; validation.cc cites each rule) ---

json Counters(int n, const std::string& value = "2") {
  json c = json::object();
  for (int i = 0; i < n; ++i) c["neuron-" + std::to_string(i)] = {{"value", value}};
  return c;
}

json CounterSlice(json sets) {
  json s = Slice(json::array());
  s["spec"].erase("devices");
  s["spec"]["sharedCounters"] = std::move(sets);
  return s;
}

json Set(const std::string& name, json counters) {
  return {{"name", name}, {"counters", std::move(counters)}};
}

json Consuming(const std::string& name, json uses) {
  json d = Device(name);
  d["consumesCounters"] = std::move(uses);
  return d;
}

json Use(const std::string& set, json counters) {
  return {{"counterSet", set}, {"counters", std::move(counters)}};
}

std::vector<std::string> Reasons(const json& object) {
  std::vector<std::string> out;
  for (const FieldError& e : Validate("ResourceSlice", object)) out.push_back(e.reason);
  return out;
}

TEST(ApiValidation, ASliceHoldsDevicesOrSharedCountersNeverBoth) {
  EXPECT_TRUE(Fields(CounterSlice({Set("neuron-devices", Counters(16))})).empty());
  json both = CounterSlice({Set("neuron-devices", Counters(1))});
  both["spec"]["devices"] = json::array();
  const auto errors = Validate("ResourceSlice", both);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "spec");
  EXPECT_NE(errors[0].message.find("only one of `sharedCounters` or `devices` is allowed"),
            std::string::npos);
}

TEST(ApiValidation, AtMost8CounterSetsOf32CountersWithLabelNames) {
  json sets = json::array();
  for (int i = 0; i < 8; ++i) sets.push_back(Set("set-" + std::to_string(i), Counters(32)));
  EXPECT_TRUE(Fields(CounterSlice(sets)).empty());
  sets.push_back(Set("set-8", Counters(1)));
  EXPECT_EQ(Fields(CounterSlice(sets)), std::vector<std::string>{"spec.sharedCounters"});
  EXPECT_EQ(Reasons(CounterSlice(sets)), std::vector<std::string>{"FieldValueTooMany"});
  EXPECT_EQ(Fields(CounterSlice({Set("s", Counters(33))})),
            std::vector<std::string>{"spec.sharedCounters[0].counters"});
  EXPECT_EQ(Fields(CounterSlice({Set("Set_0", Counters(1))})),
            std::vector<std::string>{"spec.sharedCounters[0].name"});
  EXPECT_EQ(Fields(CounterSlice({Set("s", {{"Neuron_0", {{"value", "1"}}}})})),
            std::vector<std::string>{"spec.sharedCounters[0].counters[Neuron_0]"});
  EXPECT_EQ(Fields(CounterSlice({Set("s", json::object())})),
            std::vector<std::string>{"spec.sharedCounters[0].counters"});
  const json twice = CounterSlice({Set("s", Counters(1)), Set("s", Counters(1))});
  EXPECT_EQ(Fields(twice), std::vector<std::string>{"spec.sharedCounters[1]"});
  EXPECT_EQ(Reasons(twice), std::vector<std::string>{"FieldValueDuplicate"});
}

TEST(ApiValidation, AtMost2ConsumptionsOf32CountersPerDevice) {
  const json two = {Use("a", Counters(32)), Use("b", Counters(1))};
  EXPECT_TRUE(Fields(Slice({Consuming("d", two)})).empty());
  EXPECT_EQ(Fields(Slice({Consuming(
                "d", {Use("a", Counters(1)), Use("b", Counters(1)), Use("c", Counters(1))})})),
            std::vector<std::string>{"spec.devices[0].consumesCounters"});
  EXPECT_EQ(Fields(Slice({Consuming("d", {Use("a", Counters(33))})})),
            std::vector<std::string>{"spec.devices[0].consumesCounters[0].counters"});
  EXPECT_EQ(Fields(Slice({Consuming("d", {Use("a", Counters(1)), Use("a", Counters(1))})})),
            std::vector<std::string>{"spec.devices[0].consumesCounters[1]"});
  EXPECT_EQ(Fields(Slice({Consuming("d", {Use("", Counters(1))})})),
            std::vector<std::string>{"spec.devices[0].consumesCounters[0].counterSet"});
  EXPECT_EQ(Reasons(Slice({Consuming("d", {Use("", Counters(1))})})),
            std::vector<std::string>{"FieldValueRequired"});
}

TEST(ApiValidation, AtMost64DevicesWhenOneHasTaintsOrConsumesCounters) {
  json devices = json::array();
  for (int i = 0; i < 63; ++i) devices.push_back(Device("neuroncore-" + std::to_string(i)));
  devices.push_back(Consuming("neuroncore-63", {Use("a", Counters(1))}));
  EXPECT_TRUE(Fields(Slice(devices)).empty());
  devices.push_back(Device("neuroncore-64"));
  const auto errors = Validate("ResourceSlice", Slice(devices));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "spec.devices");
  EXPECT_NE(errors[0].message.find("at most 64"), std::string::npos) << errors[0].message;
}

TEST(ApiValidation, PoolCountAndGeneration) {
  json s = Slice(json::array());
  s["spec"]["pool"]["resourceSliceCount"] = 0;
  s["spec"]["pool"]["generation"] = -1;
  EXPECT_EQ(Fields(s),
            (std::vector<std::string>{"spec.pool.resourceSliceCount", "spec.pool.generation"}));
}

TEST(ApiQuantity, ParsesTheApisGrammar) {
  const auto q = [](const char* s) { return Quantity::Parse(s).value(); };
  EXPECT_EQ(q("2"), Quantity::FromInt(2));
  EXPECT_EQ(q("+2"), Quantity::FromInt(2));
  EXPECT_EQ(q("1Ki"), Quantity::FromInt(1024));
  EXPECT_EQ(q("32Gi"), Quantity::FromInt(int64_t{32} << 30));
  EXPECT_EQ(q("1.5k"), Quantity::FromInt(1500));
  EXPECT_EQ(q("1e3"), Quantity::FromInt(1000));
  EXPECT_EQ(q("1E"), Quantity::FromInt(1'000'000'000'000'000'000));
  EXPECT_EQ(q("500m").ToString(), "0.5");
  EXPECT_EQ(q("-1").ToString(), "-1");
  EXPECT_EQ(q(".5").ToString(), "0.5");
  EXPECT_EQ(q("1n").ToString(), "0.000000001");
  EXPECT_LT(q("999m"), q("1"));
  for (const char* bad : {"", "abc", "1.2.3", "1Ki2", "1e", "--1", "1 ", "0x10", "."}) {
    EXPECT_FALSE(Quantity::Parse(bad).ok()) << bad;
  }
}

// A quantity that does not parse makes the body undecodable: 400 before validation.
TEST(ApiStore, AnUnparsableQuantityIsABadRequest) {
  Store store;
  const ApiAnswer a = store.Create(*FindKind("/apis/resource.k8s.io/v1/", "resourceslices"), "",
                                   CounterSlice({Set("s", {{"neuron-0", {{"value", "two"}}}})}));
  EXPECT_EQ(a.code, 400);
  EXPECT_EQ(a.body["reason"], "BadRequest");
  EXPECT_NE(
      a.body["message"].get<std::string>().find("quantities must match the regular expression"),
      std::string::npos);
  EXPECT_NE(a.body["message"].get<std::string>().find("spec.sharedCounters[0].counters[neuron-0]"),
            std::string::npos);
}

const Kind& Slices() { return *FindKind("/apis/resource.k8s.io/v1/", "resourceslices"); }

// DRAPartitionableDevices off: the fields go on create and on an update of a slice that did not
// use them; a stored slice that uses them keeps them (strategy.go, dropDisabledFields).
TEST(ApiStore, TheGateOffDropsThePartitionableFields) {
  Store store(FeatureGates{.partitionable_devices = false});
  ApiAnswer made = store.Create(Slices(), "", CounterSlice({Set("s", Counters(2))}));
  ASSERT_EQ(made.code, 201) << made.body.dump();
  EXPECT_FALSE(made.body["spec"].contains("sharedCounters"));
  json devices = Slice({Consuming("neuroncore-0", {Use("s", Counters(1))})});
  devices["metadata"]["name"] = "node-1-neuron.aws.com-2";
  made = store.Create(Slices(), "", devices);
  ASSERT_EQ(made.code, 201) << made.body.dump();
  EXPECT_FALSE(made.body["spec"]["devices"][0].contains("consumesCounters"));
  // Written while on, updated while off: kept.
  store.SetFeatureGates({});
  json kept = CounterSlice({Set("s", Counters(2))});
  kept["metadata"]["name"] = "kept";
  ASSERT_EQ(store.Create(Slices(), "", kept).code, 201);
  store.SetFeatureGates({.partitionable_devices = false});
  kept["spec"]["sharedCounters"][0]["counters"] = Counters(3);
  const ApiAnswer updated = store.Update(Slices(), "", "kept", kept, false);
  ASSERT_EQ(updated.code, 200) << updated.body.dump();
  EXPECT_EQ(updated.body["spec"]["sharedCounters"][0]["counters"].size(), 3u);
}

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

// SetDefaults_DeviceTaint: a taint written without timeAdded gets the time of that write,
// truncated to the second; one that has it keeps it.
TEST(ApiDefaults, ATaintWithoutTimeAddedGetsTheTimeOfTheWrite) {
  json slice = Slice({Device("neuron-0"), Device("neuron-1")});
  slice["spec"]["devices"][0]["taints"] = {
      {{"key", "neuron.aws.com/unhealthy"}, {"effect", "NoSchedule"}}};
  slice["spec"]["devices"][1]["taints"] = {{{"key", "neuron.aws.com/unhealthy"},
                                            {"effect", "NoSchedule"},
                                            {"timeAdded", "2026-01-02T03:04:05Z"}}};
  DefaultTaintTimes(slice, absl::FromUnixMillis(1765052400999));  // 2025-12-06T20:20:00.999Z
  EXPECT_EQ(slice["spec"]["devices"][0]["taints"][0]["timeAdded"], "2025-12-06T20:20:00Z");
  EXPECT_EQ(slice["spec"]["devices"][1]["taints"][0]["timeAdded"], "2026-01-02T03:04:05Z");
}

// The store defaults on create and on update: a writer that sends the stored time back writes
// nothing; one that leaves it out gets a new time (the churn the publisher avoids).
TEST(ApiStore, TaintTimesAreDefaultedOnEveryWrite) {
  Store store;
  json tainted = Slice({Device("neuron-0")});
  tainted["spec"]["devices"][0]["taints"] = {
      {{"key", "neuron.aws.com/unhealthy"}, {"value", "ecc"}, {"effect", "NoSchedule"}}};
  const ApiAnswer made = store.Create(Slices(), "", tainted);
  ASSERT_EQ(made.code, 201) << made.body.dump();
  ASSERT_TRUE(made.body["spec"]["devices"][0]["taints"][0]["timeAdded"].is_string())
      << made.body.dump();
  const ApiAnswer same = store.Update(Slices(), "", "node-1-neuron.aws.com", made.body, false);
  EXPECT_EQ(same.body["metadata"]["resourceVersion"], made.body["metadata"]["resourceVersion"]);
  json without = made.body;
  without["spec"]["devices"][0]["taints"][0].erase("timeAdded");
  const ApiAnswer again = store.Update(Slices(), "", "node-1-neuron.aws.com", without, false);
  ASSERT_EQ(again.code, 200) << again.body.dump();
  EXPECT_TRUE(again.body["spec"]["devices"][0]["taints"][0]["timeAdded"].is_string());
}

// DeleteOptions.preconditions: a delete of an object that changed since it was read is refused.
TEST(ApiStore, DeletePreconditionsNameTheObjectTheCallerSaw) {
  Store store;
  const ApiAnswer made = store.Create(Slices(), "", Slice(json::array()));
  ASSERT_EQ(made.code, 201);
  const json seen = made.body["metadata"];
  json changed = made.body;
  changed["spec"]["devices"] = {Device("neuron-0")};
  ASSERT_EQ(store.Update(Slices(), "", "node-1-neuron.aws.com", changed, false).code, 200);
  const ApiAnswer stale =
      store.Delete(Slices(), "", "node-1-neuron.aws.com",
                   {{"uid", seen["uid"]}, {"resourceVersion", seen["resourceVersion"]}});
  EXPECT_EQ(stale.code, 409);
  EXPECT_EQ(stale.body["reason"], "Conflict");
  EXPECT_NE(stale.body["message"].get<std::string>().find("Precondition failed: ResourceVersion"),
            std::string::npos)
      << stale.body.dump();
  EXPECT_EQ(store.Delete(Slices(), "", "node-1-neuron.aws.com", {{"uid", "another"}}).code, 409);
  EXPECT_EQ(store.Get(Slices(), "", "node-1-neuron.aws.com").code, 200) << "still there";
  EXPECT_EQ(store.Delete(Slices(), "", "node-1-neuron.aws.com", {{"uid", seen["uid"]}}).code, 200);
}

const Kind& Leases() { return *FindKind("/apis/coordination.k8s.io/v1/", "leases"); }

json Lease(json spec) {
  return {{"metadata", {{"name", "neuron-dra-api-node-1"}}}, {"spec", std::move(spec)}};
}

TEST(ApiStore, LeasesAreNamespacedWithOptimisticConcurrency) {
  Store store;
  const json spec = {{"holderIdentity", "pod-a"},
                     {"leaseDurationSeconds", 15},
                     {"acquireTime", "2026-12-06T23:50:01.123456Z"},
                     {"renewTime", "2026-12-06T23:50:01.123456Z"},
                     {"leaseTransitions", 0}};
  const ApiAnswer made = store.Create(Leases(), "neuron-system", Lease(spec));
  ASSERT_EQ(made.code, 201) << made.body.dump();
  EXPECT_EQ(made.body["apiVersion"], "coordination.k8s.io/v1");
  EXPECT_EQ(made.body["kind"], "Lease");
  EXPECT_EQ(made.body["metadata"]["namespace"], "neuron-system");
  EXPECT_EQ(store.Get(Leases(), "other", "neuron-dra-api-node-1").code, 404);
  EXPECT_EQ(store.Create(Leases(), "neuron-system", Lease(spec)).body["reason"], "AlreadyExists");
  // Two candidates that read the same version: the second write is a Conflict.
  json a = made.body;
  json b = made.body;
  a["spec"]["renewTime"] = "2026-12-06T23:50:03.000000Z";
  ASSERT_EQ(store.Update(Leases(), "neuron-system", "neuron-dra-api-node-1", a, false).code, 200);
  b["spec"]["holderIdentity"] = "pod-b";
  const ApiAnswer stale =
      store.Update(Leases(), "neuron-system", "neuron-dra-api-node-1", b, false);
  EXPECT_EQ(stale.code, 409);
  EXPECT_EQ(stale.body["reason"], "Conflict");
  EXPECT_EQ(store.Delete(Leases(), "neuron-system", "neuron-dra-api-node-1").code, 200);
}

TEST(ApiStore, ALeaseIsValidatedAndDecodedAsTheServerDoes) {
  Store store;
  const auto create = [&store](json spec) {
    return store.Create(Leases(), "neuron-system", Lease(std::move(spec)));
  };
  // Validation (422): a duration, when given, above 0; transitions not below 0.
  ApiAnswer a = create({{"leaseDurationSeconds", 0}});
  EXPECT_EQ(a.code, 422);
  EXPECT_EQ(a.body["details"]["causes"][0]["field"], "spec.leaseDurationSeconds");
  EXPECT_EQ(create({{"leaseTransitions", -1}}).code, 422);
  // The decoder (400): holderIdentity a string, MicroTimes with exactly six fraction digits.
  EXPECT_EQ(create({{"holderIdentity", 7}}).code, 400);
  EXPECT_EQ(create({{"leaseDurationSeconds", "15"}}).code, 400);
  EXPECT_EQ(create({{"renewTime", "2026-12-06T23:50:01Z"}}).code, 400);
  EXPECT_EQ(create({{"acquireTime", "2026-13-06T23:50:01.123456Z"}}).code, 400);
  a = create({{"renewTime", "yesterday"}});
  EXPECT_EQ(a.code, 400);
  EXPECT_NE(a.body["message"].get<std::string>().find("spec.renewTime"), std::string::npos);
  // A released lease (holderIdentity "") and an empty spec are valid.
  EXPECT_EQ(
      create({{"holderIdentity", ""}, {"renewTime", "2026-12-06T23:50:01.000000+01:00"}}).code,
      201);
}

}  // namespace
}  // namespace neuron::sim::apiserver
