// The DRA ResourceSlice built from the plugin's NodeView (plugin/dra/slice.h): connected groups
// per instance type, EFA locality, taints from health, the API's name rules and limits, and a
// golden slice of a trn1.32xlarge.

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/model/catalog.h"
#include "plugin/dra/slice.h"
#include "tests/plugin/dra_testing.h"
#include "tests/support/golden.h"

namespace neuron::plugin::dra {
namespace {

using ::neuron::plugin::dra::testing::CatalogHardware;
using ::neuron::plugin::dra::testing::ViewOf;
using nlohmann::json;

const SliceOptions kOptions{.node_name = "ip-10-0-0-1.ec2.internal", .dra_driver_version = "0.9.0"};

// Without --dra.partitionable: neuron.aws.com's one slice, then efa.neuron.aws.com's when the
// node has an EFA.
std::vector<json> Slices(const NodeView& view, const SliceOptions& options) {
  absl::StatusOr<std::vector<json>> pool = BuildPool(view, options, 7);
  EXPECT_TRUE(pool.ok()) << pool.status();
  if (!pool.ok()) return {};
  EXPECT_EQ(pool->size(), view.efas.empty() || !options.efa ? 1u : 2u);
  return *std::move(pool);
}

// neuron.aws.com's slice.
json Spec(const NodeView& view, const SliceOptions& options = kOptions) {
  std::vector<json> slices = Slices(view, options);
  if (slices.empty()) return json::object();
  EXPECT_EQ(slices[0]["driver"], "neuron.aws.com");
  return slices[0];
}

// efa.neuron.aws.com's slice: a pool of its own, named after the node.
json EfaSpec(const NodeView& view, const SliceOptions& options = kOptions) {
  std::vector<json> slices = Slices(view, options);
  if (slices.size() < 2) return json::object();
  EXPECT_EQ(slices[1]["driver"], "efa.neuron.aws.com");
  EXPECT_EQ(slices[1]["pool"]["name"], options.node_name);
  EXPECT_EQ(slices[1]["pool"]["resourceSliceCount"], 1);
  return slices[1];
}

const json* Find(const json& spec, const std::string& name) {
  for (const json& d : spec["devices"]) {
    if (d["name"] == name) return &d;
  }
  return nullptr;
}

std::string Type(const json& d) { return d["attributes"]["resourceType"]["string"]; }

// Group id -> device names, for one devicegroupN_id attribute and one resourceType.
std::map<int, std::set<std::string>> Groups(const json& spec, int size, const std::string& type) {
  std::map<int, std::set<std::string>> out;
  const std::string key = "resource.aws.com/devicegroup" + std::to_string(size) + "_id";
  for (const json& d : spec["devices"]) {
    if (Type(d) != type || !d["attributes"].contains(key)) continue;
    // AWS's type: a string equal within the group; ours is "g<size>-<group>".
    const std::string id = d["attributes"][key]["string"].get<std::string>();
    const std::string prefix = "g" + std::to_string(size) + "-";
    EXPECT_TRUE(id.starts_with(prefix)) << id;
    out[std::stoi(id.substr(prefix.size()))].insert(d["name"].get<std::string>());
  }
  return out;
}

std::set<std::string> Names(std::initializer_list<int> indices) {
  std::set<std::string> out;
  for (int i : indices) out.insert(NeuronDeviceName(i));
  return out;
}

TEST(DraSliceTest, Trn1ConnectedGroupsOf4And8And16) {
  const auto view = ViewOf(CatalogHardware("trn1.32xlarge"));
  const json spec = Spec(*view);
  EXPECT_EQ(spec["driver"], "neuron.aws.com");
  EXPECT_EQ(spec["pool"],
            (json{{"name", kOptions.node_name}, {"generation", 7}, {"resourceSliceCount", 1}}));
  EXPECT_EQ(spec["nodeName"], kOptions.node_name);
  const auto g4 = Groups(spec, 4, "neuron_device");
  ASSERT_EQ(g4.size(), 4u);
  EXPECT_EQ(g4.at(0), Names({0, 1, 2, 3}));
  EXPECT_EQ(g4.at(3), Names({12, 13, 14, 15}));
  const auto g8 = Groups(spec, 8, "neuron_device");
  ASSERT_EQ(g8.size(), 2u);
  EXPECT_EQ(g8.at(1), Names({8, 9, 10, 11, 12, 13, 14, 15}));
  ASSERT_EQ(Groups(spec, 16, "neuron_device").size(), 1u);
  // Every group really is connected on the torus.
  for (const auto& [id, names] : g4) {
    std::vector<int> members;
    for (const std::string& n : names) members.push_back(std::stoi(n.substr(7)));
    EXPECT_TRUE(view->allocator->topology().IsConnected(members)) << id;
  }
  const json& d6 = *Find(spec, "neuron-6");
  // AWS's meaning (deploy/eks/dra.rst): topology_x the row, topology_y the column.
  EXPECT_EQ(d6["attributes"]["topology_x"]["int"], 1);
  EXPECT_EQ(d6["attributes"]["topology_y"]["int"], 2);
  EXPECT_EQ(d6["attributes"]["topology4_id"]["int"], 1);
  EXPECT_EQ(d6["attributes"]["topology8_id"]["int"], 0);
  EXPECT_EQ(d6["attributes"]["deviceId"]["int"], 6);
  EXPECT_EQ(d6["attributes"]["instanceType"]["string"], "trn1.32xlarge");
  EXPECT_EQ(d6["attributes"]["coreCount"]["int"], 2);
}

// The EFAs are devices of efa.neuron.aws.com, never of neuron.aws.com: a class that selects
// neuron.aws.com by driver alone (AWS's) cannot hand one to a request for Neuron devices.
TEST(DraSliceTest, Trn1EfasAreTheirOwnDriversPoolAndCarryTheGroupsOfTheDevicesBesideThem) {
  const auto view = ViewOf(CatalogHardware("trn1.32xlarge"));
  const json neuron = Spec(*view);
  EXPECT_TRUE(Groups(neuron, 4, "efa").empty());
  EXPECT_EQ(neuron["devices"].size(), 16u);
  const json spec = EfaSpec(*view);
  EXPECT_EQ(spec["devices"].size(), 8u);
  // 8 EFAs, 2 per PCI root bus (docs/hardware.md#pcie-layout): each group of 4 gets 2, each
  // group of 8 gets 4; so "4 connected devices and the EFAs beside them" is one matchAttribute.
  const auto g4 = Groups(spec, 4, "efa");
  ASSERT_EQ(g4.size(), 4u);
  for (const auto& [id, names] : g4) EXPECT_EQ(names.size(), 2u) << id;
  const auto g8 = Groups(spec, 8, "efa");
  ASSERT_EQ(g8.size(), 2u);
  for (const auto& [id, names] : g8) EXPECT_EQ(names.size(), 4u) << id;
  // Devices 0 and 1 share bus 0x10 with rdmap16s25: their devicegroup1_id is its BDF.
  const json& efa = *Find(spec, "efa-rdmap16s25");
  EXPECT_EQ(efa["attributes"]["resource.aws.com/devicegroup1_id"]["string"], "0000:10:19.0");
  for (const char* d : {"neuron-0", "neuron-1"}) {
    EXPECT_EQ((*Find(neuron, d))["attributes"]["resource.aws.com/devicegroup1_id"]["string"],
              "0000:10:19.0")
        << d;
  }
  EXPECT_EQ(efa["attributes"]["resource.aws.com/devicegroup4_id"]["string"], "g4-0");
  // --dra.efa=false: AWS's EFA driver serves them; the devices still name the EFA beside them.
  SliceOptions without = kOptions;
  without.efa = false;
  const json alone = Spec(*view, without);
  EXPECT_EQ(alone, neuron);
}

TEST(DraSliceTest, Trn2AtLnc2) {
  const json spec = Spec(*ViewOf(CatalogHardware("trn2.48xlarge", 2)));
  EXPECT_EQ(Groups(spec, 4, "neuron_device").size(), 4u);
  EXPECT_EQ(Groups(spec, 8, "neuron_device").size(), 2u);
  EXPECT_EQ(Groups(spec, 16, "neuron_device").size(), 1u);
  EXPECT_EQ((*Find(spec, "neuron-0"))["attributes"]["coreCount"]["int"], 4);
  // One EFA per chip (16): every group of 4 gets 4.
  const auto g4 = Groups(EfaSpec(*ViewOf(CatalogHardware("trn2.48xlarge", 2))), 4, "efa");
  ASSERT_EQ(g4.size(), 4u);
  for (const auto& [id, names] : g4) EXPECT_EQ(names.size(), 4u) << id;
  const json lnc1 = Spec(*ViewOf(CatalogHardware("trn2.48xlarge", 1)));
  EXPECT_EQ((*Find(lnc1, "neuron-0"))["attributes"]["coreCount"]["int"], 8);
}

// Each attribute of core/driver/device_attributes.h as read, under its DRA name; one that could
// not be read is left out, never published empty.
TEST(DraSliceTest, PublishedAttributesAsReadAndAbsentWhenUnread) {
  Hardware hw = CatalogHardware("trn1.32xlarge");
  hw.devices[0].attributes.Set(0, "0123456789abcdef");
  const json spec = Spec(*ViewOf(hw));
  EXPECT_EQ((*Find(spec, "neuron-0"))["attributes"]["serialNumber"],
            json::parse(R"({"string": "0123456789abcdef"})"));
  EXPECT_FALSE((*Find(spec, "neuron-1"))["attributes"].contains("serialNumber"));
}

TEST(DraSliceTest, Inf2RingHasGroupsOf4And8AndNoEfa) {
  const json spec = Spec(*ViewOf(CatalogHardware("inf2.48xlarge")));
  const auto g4 = Groups(spec, 4, "neuron_device");
  ASSERT_EQ(g4.size(), 3u);
  EXPECT_EQ(g4.at(2), Names({8, 9, 10, 11}));
  EXPECT_EQ(Groups(spec, 8, "neuron_device").size(), 1u);  // 8..15 is not on a 12-device node
  EXPECT_TRUE(Groups(spec, 16, "neuron_device").empty());
  const json& d0 = *Find(spec, "neuron-0");
  EXPECT_FALSE(d0["attributes"].contains("topology_x"));  // a ring has no x/y
  // Without an EFA, devicegroup1_id is the device's own BDF.
  EXPECT_EQ(d0["attributes"]["resource.aws.com/devicegroup1_id"]["string"], "0000:80:1e.0");
  EXPECT_EQ(spec["devices"].size(), 12u);
}

TEST(DraSliceTest, HealthBecomesTaints) {
  Hardware hw = CatalogHardware("trn1.32xlarge");
  hw.devices[3].healthy = false;
  hw.devices[3].reason = "uncorrected ECC errors";
  hw.devices[4].healthy = false;  // state unreadable: unknown, not a fault
  hw.devices[4].reason = "state unknown";
  hw.devices[4].unknown = true;
  hw.devices[5].present = false;
  hw.devices[5].healthy = false;
  hw.devices[5].reason = "absent";
  for (HardwareEfa& e : hw.efas) {
    if (e.name != "rdmap16s25") continue;
    e.healthy = false;
    e.reason = "port DOWN";
  }
  const auto view = ViewOf(hw);
  const json spec = Spec(*view);
  EXPECT_EQ((*Find(spec, "neuron-3"))["taints"], json::parse(R"([{"key": "neuron.aws.com/unhealthy",
      "value": "uncorrected-ECC-errors", "effect": "NoSchedule"}])"));
  EXPECT_FALSE(Find(spec, "neuron-4")->contains("taints"));
  EXPECT_EQ(Find(spec, "neuron-5"), nullptr);  // a removed device is not offered
  EXPECT_EQ((*Find(EfaSpec(*view), "efa-rdmap16s25"))["taints"][0]["value"], "port-DOWN");
  EXPECT_FALSE(Find(spec, "neuron-2")->contains("taints"));
  SliceOptions noexec = kOptions;
  noexec.taint_effect = TaintEffect::kNoExecute;
  EXPECT_EQ((*Find(Spec(*view, noexec), "neuron-3"))["taints"][0]["effect"], "NoExecute");
}

// The policy's action picks the effect: evict is NoExecute, a withheld device (a check or reset
// under way) NoSchedule whatever else, a device only degraded under `taint` None.
TEST(DraSliceTest, ThePolicysActionPicksTheEffect) {
  Hardware hw = CatalogHardware("trn1.32xlarge");
  hw.devices[1].healthy = false;
  hw.devices[1].reason = "state INVALID";
  hw.devices[1].action = Action::kEvict;
  hw.devices[2].healthy = false;
  hw.devices[2].reason = "withheld for a health check or reset";
  hw.devices[2].withheld = true;
  hw.devices[2].action = Action::kEvict;
  hw.devices[3].health.degraded_classes = {EvidenceClass::kEccCorrected};
  hw.devices[3].action = Action::kTaint;
  hw.devices[4].health.degraded_classes = {EvidenceClass::kEccCorrected};
  hw.devices[4].action = Action::kIgnore;  // ecc_corrected: ignore
  const json spec = Spec(*ViewOf(hw));
  EXPECT_EQ((*Find(spec, "neuron-1"))["taints"][0]["effect"], "NoExecute");
  EXPECT_EQ((*Find(spec, "neuron-2"))["taints"][0]["effect"], "NoSchedule");
  EXPECT_EQ((*Find(spec, "neuron-3"))["taints"], json::parse(R"([{"key": "neuron.aws.com/unhealthy",
      "value": "degraded-corrected-ECC", "effect": "None"}])"));
  EXPECT_FALSE(Find(spec, "neuron-4")->contains("taints"));
}

TEST(DraSliceTest, NamesFollowTheApiRules) {
  EXPECT_TRUE(ValidateDnsLabel("x", "neuron-15").ok());
  EXPECT_TRUE(ValidateDnsLabel("x", "efa-rdmap16s25").ok());
  EXPECT_EQ(EfaDeviceName("RDMAP16s25"), "efa-rdmap16s25");
  for (const char* bad : {"", "-a", "a-", "A", "a_b", "a.b"}) {
    EXPECT_FALSE(ValidateDnsLabel("x", bad).ok()) << bad;
  }
  EXPECT_FALSE(ValidateDnsLabel("x", std::string(64, 'a')).ok());
  EXPECT_TRUE(ValidateDnsLabel("x", std::string(63, 'a')).ok());
  EXPECT_TRUE(ValidateDnsSubdomain("node", "ip-10-0-0-1.ec2.internal").ok());
  EXPECT_FALSE(ValidateDnsSubdomain("node", "ip..internal").ok());
  SliceOptions bad = kOptions;
  bad.node_name = "Node_1";
  EXPECT_FALSE(BuildPool(*ViewOf(CatalogHardware("inf2.xlarge")), bad, 1).ok());
  // An EFA whose name makes a bad device name refuses the slice rather than publish it.
  Hardware hw = CatalogHardware("inf2.xlarge");
  hw.efas.push_back(testing::Efa("efa_0"));
  EXPECT_FALSE(BuildPool(*ViewOf(hw), kOptions, 1).ok());
}

// The one table of device kinds (device_kinds.h): every name the slice makes reads back as its
// kind and number; what is not ours, or not canonical, does not; and what each kind holds.
TEST(DraDeviceKindsTest, NamesReadBackAndWhatEachHolds) {
  EXPECT_EQ(ParseDeviceName(NeuronDeviceName(12), 4096),
            (DeviceRef{DeviceKind::kNeuronDevice, 12}));
  EXPECT_EQ(ParseDeviceName(CoreDeviceName(0), 4096), (DeviceRef{DeviceKind::kNeuronCore, 0}));
  EXPECT_EQ(ParseDeviceName(kNodeDeviceName, 4096), (DeviceRef{DeviceKind::kNeuronNode, -1}));
  EXPECT_EQ(ParseDeviceName(EfaDeviceName("rdmap16s25"), 4096), (DeviceRef{DeviceKind::kEfa, -1}));
  for (const char* bad : {"neuron-", "neuron-01", "neuron--1", "neuron-+1", "neuron-1x",
                          "neuroncore-", "gpu-0", "efa-", "neuron-4097"}) {
    EXPECT_FALSE(ParseDeviceName(bad, 4096).has_value()) << bad;
  }
  for (const DeviceKindSpec& k : kDeviceKinds) {
    EXPECT_EQ(&KindSpec(k.kind), &k);
    EXPECT_FALSE(k.resource_type.empty());
  }
  const std::vector<int> present = {0, 1, 3};
  EXPECT_EQ(HeldCores({DeviceKind::kNeuronDevice, 1}, 2, present), (std::vector<int>{2, 3}));
  EXPECT_EQ(HeldCores({DeviceKind::kNeuronCore, 5}, 2, present), (std::vector<int>{5}));
  EXPECT_EQ(HeldCores({DeviceKind::kNeuronNode, -1}, 2, present),
            (std::vector<int>{0, 1, 2, 3, 6, 7}));
  EXPECT_TRUE(HeldCores({DeviceKind::kEfa, -1}, 2, present).empty());
}

TEST(DraSliceTest, AtMost128DevicesAnd32AttributesPerDevice) {
  Hardware hw = CatalogHardware("trn2.48xlarge", 2);
  for (int i = 0; hw.efas.size() <= kMaxDevicesPerSlice; ++i) {
    hw.efas.push_back(testing::Efa("rdmapx" + std::to_string(i)));
  }
  const absl::StatusOr<std::vector<json>> spec = BuildPool(*ViewOf(hw), kOptions, 1);
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("at most 128"), std::string_view::npos);
  // 64 devices at most once one has a taint.
  Hardware tainted = CatalogHardware("trn2.48xlarge", 2);
  while (tainted.efas.size() < 65) {
    tainted.efas.push_back(testing::Efa("rdmapy" + std::to_string(tainted.efas.size())));
  }
  EXPECT_TRUE(BuildPool(*ViewOf(tainted), kOptions, 1).ok());
  tainted.efas.back().healthy = false;
  tainted.efas.back().reason = "port DOWN";
  const absl::StatusOr<std::vector<json>> refused = BuildPool(*ViewOf(tainted), kOptions, 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("at most 64"), std::string_view::npos);
  const json trn2 = Spec(*ViewOf(CatalogHardware("trn2.48xlarge")));
  for (const json& d : trn2["devices"]) {
    const size_t n = d["attributes"].size() + (d.contains("capacity") ? d["capacity"].size() : 0);
    EXPECT_LE(n, kMaxAttributesPerDevice) << d["name"];
  }
}

TEST(DraSliceTest, TheDocumentsGenerationRisesOnEveryChangeOnly) {
  SliceState state(kOptions, 1000);
  EXPECT_EQ(state.Get().status, 503);  // before the first scan
  Hardware hw = CatalogHardware("trn1.32xlarge");
  state.Update(*ViewOf(hw));
  SliceState::Document doc = state.Get();
  ASSERT_EQ(doc.status, 200);
  json j = json::parse(doc.body);
  EXPECT_EQ(j["generation"], 1000);
  ASSERT_EQ(j["slices"].size(), 2u);  // neuron.aws.com's and efa.neuron.aws.com's
  EXPECT_EQ(j["slices"][0]["pool"]["generation"], 1000);
  EXPECT_EQ(j["slices"][1]["pool"]["generation"], 1000);
  EXPECT_EQ(j["nodeName"], kOptions.node_name);
  state.Update(*ViewOf(hw));  // nothing changed
  EXPECT_EQ(state.generation(), 1000u);
  hw.devices[2].healthy = false;
  hw.devices[2].reason = "NEURON_HW_ERR record";
  state.Update(*ViewOf(hw));  // a taint
  EXPECT_EQ(state.generation(), 1001u);
  hw.devices[2].healthy = true;
  hw.devices[2].reason.clear();
  state.Update(*ViewOf(hw));  // the taint cleared
  j = json::parse(state.Get().body);
  EXPECT_EQ(j["generation"], 1002);
  EXPECT_FALSE((*Find(j["slices"][0], "neuron-2")).contains("taints"));
  // A reader that has the current generation gets 304 and no body; one behind gets the pool.
  EXPECT_EQ(state.Get(1002).status, 304);
  EXPECT_TRUE(state.Get(1002).body.empty());
  EXPECT_EQ(state.Get(1001).status, 200);
  // A view that makes no valid slice keeps the last good one.
  for (int i = 0; i < 200; ++i) hw.efas.push_back(testing::Efa("x" + std::to_string(i)));
  state.Update(*ViewOf(hw));
  EXPECT_EQ(state.Get().status, 200);
  EXPECT_EQ(state.generation(), 1002u);
}

TEST(DraSliceTest, ALateOlderViewDoesNotUndoANewerOne) {
  NodeState node(std::chrono::milliseconds(1000));
  Hardware hw = CatalogHardware("inf2.xlarge");
  node.SetHardware(hw);
  const auto older = node.view();
  hw.devices[0].healthy = false;
  hw.devices[0].reason = "absent";
  node.SetHardware(hw);
  SliceState state(kOptions, 1);
  state.Update(*node.view());
  state.Update(*older);  // delivered late by a racing thread
  EXPECT_TRUE((*Find(json::parse(state.Get().body)["slices"][0], "neuron-0")).contains("taints"));
}

// tests/fixtures/plugin/dra_slice_trn1{,_efa}.json; NEURON_UPDATE_GOLDENS=1 rewrites them.
TEST(DraSliceTest, GoldenTrn1) {
  const auto view = ViewOf(CatalogHardware("trn1.32xlarge"));
  ::neuron::testing::ExpectGolden("plugin/dra_slice_trn1.json", Spec(*view).dump(1) + "\n");
  ::neuron::testing::ExpectGolden("plugin/dra_slice_trn1_efa.json", EfaSpec(*view).dump(1) + "\n");
}

}  // namespace
}  // namespace neuron::plugin::dra
