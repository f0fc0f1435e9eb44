// The partitionable pool (plugin/dra/slice.h BuildPool with --dra.partitionable, the contract in
// docs/kubelet-api.md#dra-pool): the counter slice, whole devices and NeuronCores consuming it,
// neuron-node on an UltraServer node, taints on cores and the node, the API's limits
// (slice_limits.cc), the document's "slices" and a golden pool of a trn1.32xlarge.

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <optional>
#include <set>

#include "plugin/dra/slice.h"
#include "tests/plugin/dra_testing.h"
#include "tests/support/golden.h"

namespace neuron::plugin::dra {
namespace {

using ::neuron::plugin::dra::testing::CatalogHardware;
using ::neuron::plugin::dra::testing::ViewOf;
using nlohmann::json;

const SliceOptions kPartitionable{
    .node_name = "ip-10-0-0-1.ec2.internal", .dra_driver_version = "0.9.0", .partitionable = true};

// neuron.aws.com's pool. The EFAs' pool (efa.neuron.aws.com, after it) shares no counter.
std::vector<json> Pool(const Hardware& hw, const SliceOptions& options = kPartitionable) {
  absl::StatusOr<std::vector<json>> pool = BuildPool(*ViewOf(hw), options, 3);
  EXPECT_TRUE(pool.ok()) << pool.status();
  if (!pool.ok()) return {};
  std::vector<json> out;
  for (json& s : *pool) {
    if (s["driver"] == "neuron.aws.com") {
      out.push_back(std::move(s));
      continue;
    }
    EXPECT_EQ(s["driver"], "efa.neuron.aws.com");
    EXPECT_FALSE(s.contains("sharedCounters"));
    for (const json& d : s["devices"]) EXPECT_FALSE(d.contains("consumesCounters")) << d["name"];
  }
  return out;
}

// A trn2u.48xlarge at LNC 2, node 1 of a 4-node UltraServer (as core reads the driver's files).
Hardware Trn2u() {
  Hardware hw = CatalogHardware("trn2u.48xlarge", 2);
  hw.node.ultraserver = UltraServerInfo{
      .supported_modes = {1, 3, 4},
      .memberships = {{4, "x4", 1, "0123456789abcdef"}, {2, "x2v", 1, "0123456789abcdef"}}};
  return hw;
}

// Every device of the pool by name.
std::map<std::string, json> Devices(const std::vector<json>& pool) {
  std::map<std::string, json> out;
  for (const json& s : pool) {
    for (const json& d : s.value("devices", json::array())) out[d["name"]] = d;
  }
  return out;
}

// What a device consumes, counter -> amount.
std::map<std::string, int> Consumed(const json& device) {
  std::map<std::string, int> out;
  for (const json& c : device.value("consumesCounters", json::array())) {
    EXPECT_EQ(c["counterSet"], "neuron-devices");
    for (const auto& [name, v] : c["counters"].items()) {
      out[name] += std::stoi(v["value"].get<std::string>());
    }
  }
  return out;
}

// The pool's shape on an instance: slices, counters equal to the cores that consume them, whole
// devices consuming all of their counter, core names and ids, at most 64 devices per slice.
void ExpectPool(const std::vector<json>& pool, int devices, int cores_per_device) {
  const size_t core_slices = (devices * cores_per_device + 63) / 64;
  ASSERT_EQ(pool.size(), 2 + core_slices);
  for (const json& s : pool) {
    EXPECT_EQ(s["pool"]["resourceSliceCount"], pool.size());
    EXPECT_EQ(s["pool"]["generation"], 3);
    EXPECT_NE(s.contains("devices"), s.contains("sharedCounters"));
    EXPECT_LE(s.value("devices", json::array()).size(), kMaxDevicesPerSliceWithTaints);
  }
  ASSERT_EQ(pool[1]["sharedCounters"].size(), 1u);
  const json& counters = pool[1]["sharedCounters"][0]["counters"];
  EXPECT_EQ(pool[1]["sharedCounters"][0]["name"], "neuron-devices");
  ASSERT_EQ(counters.size(), static_cast<size_t>(devices));
  std::map<std::string, int> by_cores;
  const std::map<std::string, json> all = Devices(pool);
  for (int c = 0; c < devices * cores_per_device; ++c) {
    const json& core = all.at(CoreDeviceName(c));
    EXPECT_EQ(core["attributes"]["resourceType"]["string"], "neuron_core");
    EXPECT_EQ(core["attributes"]["coreId"]["int"], c);
    EXPECT_EQ(core["attributes"]["deviceId"]["int"], c / cores_per_device);
    EXPECT_EQ(Consumed(core),
              (std::map<std::string, int>{{NeuronDeviceName(c / cores_per_device), 1}}));
    by_cores[NeuronDeviceName(c / cores_per_device)] += 1;
  }
  for (int i = 0; i < devices; ++i) {
    const std::string name = NeuronDeviceName(i);
    EXPECT_EQ(counters[name]["value"], std::to_string(cores_per_device)) << name;
    EXPECT_EQ(by_cores[name], cores_per_device) << name;  // the cores use the counter up
    EXPECT_EQ(Consumed(all.at(name)), (std::map<std::string, int>{{name, cores_per_device}}));
  }
  EXPECT_TRUE(CheckPool(pool).ok());
}

TEST(DraPoolTest, Trn1AndTrn2AtEachLnc) {
  ASSERT_NO_FATAL_FAILURE(ExpectPool(Pool(CatalogHardware("trn1.32xlarge")), 16, 2));
  ASSERT_NO_FATAL_FAILURE(ExpectPool(Pool(CatalogHardware("trn2.48xlarge", 2)), 16, 4));
  const std::vector<json> lnc1 = Pool(CatalogHardware("trn2.48xlarge", 1));
  ASSERT_NO_FATAL_FAILURE(ExpectPool(lnc1, 16, 8));
  // 128 cores: two slices of 64, in core order.
  EXPECT_EQ(lnc1[2]["devices"].size(), 64u);
  EXPECT_EQ(lnc1[3]["devices"][0]["name"], "neuroncore-64");
  // No UltraServer here: no neuron-node.
  EXPECT_EQ(Devices(lnc1).count("neuron-node"), 0u);
}

TEST(DraPoolTest, CoresCarryTheirDevicesPlacementAndGroups) {
  const std::map<std::string, json> all = Devices(Pool(CatalogHardware("trn2.48xlarge", 2)));
  const json& core = all.at("neuroncore-25")["attributes"];  // device 6 at 4 cores per device
  const json& device = all.at("neuron-6")["attributes"];
  for (const char* key :
       {"deviceId", "instanceType", "neuronDriverVersion", "draDriverVersion", "numaNode",
        "topology_x", "topology_y", "topology4_id", "topology8_id",
        "resource.aws.com/devicegroup1_id", "resource.aws.com/devicegroup4_id",
        "resource.aws.com/devicegroup8_id", "resource.aws.com/devicegroup16_id"}) {
    ASSERT_TRUE(device.contains(key)) << key;
    EXPECT_EQ(core[key], device[key]) << key;
  }
  // "8 cores in one group of 4": the cores of devices 4..7 share devicegroup4_id 1.
  std::set<std::string> group;
  for (int c = 16; c < 32; ++c) {
    group.insert(
        all.at(CoreDeviceName(c))["attributes"]["resource.aws.com/devicegroup4_id"]["string"]
            .get<std::string>());
  }
  EXPECT_EQ(group, std::set<std::string>{"g4-1"});
}

// The runtime takes one contiguous run of cores, so a claim for k cores matches on
// coregroup<k>_id: the aligned run [g*k, (g+1)*k), inside a device or over a connected group.
TEST(DraPoolTest, CoresCarryTheirAlignedRunOfCores) {
  auto run_of = [](const std::map<std::string, json>& all, int core, int k) -> std::optional<int> {
    const json& a = all.at(CoreDeviceName(core))["attributes"];
    const std::string key = "coregroup" + std::to_string(k) + "_id";
    if (!a.contains(key)) return std::nullopt;
    return a[key]["int"].get<int>();
  };
  // trn2.48xlarge at LNC 2: 4 cores per device; runs of 2 and 4 inside a device, 8 over two
  // neighbouring devices.
  const std::map<std::string, json> trn2 = Devices(Pool(CatalogHardware("trn2.48xlarge", 2)));
  for (int c = 0; c < 64; ++c) {
    EXPECT_EQ(run_of(trn2, c, 2), c / 2) << c;
    EXPECT_EQ(run_of(trn2, c, 4), c / 4) << c;
    EXPECT_EQ(run_of(trn2, c, 8), c / 8) << c;
  }
  // trn1.32xlarge: 2 cores per device; a run of 8 is four devices, a connected group of 4.
  const std::map<std::string, json> trn1 = Devices(Pool(CatalogHardware("trn1.32xlarge")));
  EXPECT_EQ(run_of(trn1, 13, 2), 6);
  EXPECT_EQ(run_of(trn1, 13, 4), 3);
  EXPECT_EQ(run_of(trn1, 13, 8), 1);
  // trn2 at LNC 1: 8 cores per device, so every run lies inside one device.
  const std::map<std::string, json> lnc1 = Devices(Pool(CatalogHardware("trn2.48xlarge", 1)));
  EXPECT_EQ(run_of(lnc1, 100, 8), 12);
}

TEST(DraPoolTest, Trn2uOffersTheWholeNode) {
  const std::vector<json> pool = Pool(Trn2u());
  ASSERT_NO_FATAL_FAILURE(ExpectPool(pool, 16, 4));
  // In slices[0], beside the 16 devices (the 16 EFAs are efa.neuron.aws.com's).
  ASSERT_EQ(pool[0]["devices"].size(), 17u);
  const json& node = pool[0]["devices"][16];
  EXPECT_EQ(node["name"], "neuron-node");
  EXPECT_EQ(node["attributes"], json::parse(R"({"resourceType": {"string": "neuron_node"},
                            "instanceType": {"string": "trn2u.48xlarge"},
                            "neuronDriverVersion": {"string": "2.29.0.0"},
                            "draDriverVersion": {"version": "0.9.0"},
                            "deviceCount": {"int": 16}, "coreCount": {"int": 64}})"));
  // One consumption of every device's counter in full (16 counters, within 32).
  ASSERT_EQ(node["consumesCounters"].size(), 1u);
  std::map<std::string, int> full;
  for (int i = 0; i < 16; ++i) full[NeuronDeviceName(i)] = 4;
  EXPECT_EQ(Consumed(node), full);
  // Not without counters (the scheduler could give the node and a device to two claims), and
  // not where the node is in no UltraServer.
  SliceOptions plain = kPartitionable;
  plain.partitionable = false;
  EXPECT_EQ(Devices(Pool(Trn2u(), plain)).count("neuron-node"), 0u);
  Hardware outside = Trn2u();
  outside.node.ultraserver = UltraServerInfo{};  // ultraserver_mode ""
  EXPECT_EQ(Devices(Pool(outside)).count("neuron-node"), 0u);
  outside.node.ultraserver.reset();  // no attributes, or the election in progress
  EXPECT_EQ(Devices(Pool(outside)).count("neuron-node"), 0u);
}

TEST(DraPoolTest, WithoutPartitionableThePoolIsTodaysSlice) {
  SliceOptions plain = kPartitionable;
  plain.partitionable = false;
  for (const char* type : {"trn1.32xlarge", "trn2u.48xlarge"}) {
    Hardware hw = type == std::string_view("trn1.32xlarge") ? CatalogHardware(type) : Trn2u();
    const std::vector<json> off = Pool(hw, plain);
    ASSERT_EQ(off.size(), 1u) << type;
    EXPECT_EQ(off[0]["pool"]["resourceSliceCount"], 1);
    // slices[0] of the partitionable pool is the same but for the counters and neuron-node.
    json on = Pool(hw)[0];
    json devices = json::array();
    for (json d : on["devices"]) {
      if (d["name"] == "neuron-node") continue;
      d.erase("consumesCounters");
      devices.push_back(d);
    }
    on["devices"] = devices;
    on["pool"]["resourceSliceCount"] = 1;
    EXPECT_EQ(on, off[0]) << type;
  }
}

TEST(DraPoolTest, ADevicesTaintIsOnItsCoresAndTheNode) {
  Hardware hw = Trn2u();
  hw.devices[3].healthy = false;
  hw.devices[3].reason = "uncorrected ECC errors";
  const std::map<std::string, json> all = Devices(Pool(hw));
  const json taint = all.at("neuron-3")["taints"];
  ASSERT_EQ(taint.size(), 1u);
  for (int c = 12; c < 16; ++c) EXPECT_EQ(all.at(CoreDeviceName(c))["taints"], taint) << c;
  EXPECT_FALSE(all.at("neuroncore-11").contains("taints"));
  EXPECT_FALSE(all.at("neuroncore-16").contains("taints"));
  EXPECT_EQ(all.at("neuron-node")["taints"], json::parse(R"([{"key": "neuron.aws.com/unhealthy",
                             "value": "neuron-3-uncorrected-ECC-errors", "effect": "NoSchedule"}])"));
  // Unknown health is no fault: no taint on the device, its cores or the node.
  hw.devices[3].unknown = true;
  const std::map<std::string, json> unknown = Devices(Pool(hw));
  EXPECT_FALSE(unknown.at("neuroncore-12").contains("taints"));
  EXPECT_FALSE(unknown.at("neuron-node").contains("taints"));
  // A removed device: not offered, nor its cores or counter; the node, no longer whole, is
  // tainted and consumes what is left.
  hw.devices[3].present = hw.devices[3].unknown = false;
  hw.devices[3].reason = "absent";
  const std::vector<json> pool = Pool(hw);
  const std::map<std::string, json> gone = Devices(pool);
  EXPECT_EQ(gone.count("neuroncore-12"), 0u);
  EXPECT_FALSE(pool[1]["sharedCounters"][0]["counters"].contains("neuron-3"));
  EXPECT_EQ(gone.at("neuron-node")["taints"][0]["value"], "neuron-3-absent");
  EXPECT_EQ(Consumed(gone.at("neuron-node")).size(), 15u);
  EXPECT_EQ(gone.at("neuron-node")["attributes"]["deviceCount"]["int"], 15);
  // No device left: nothing to share, no node to offer; an empty first slice (the EFAs are
  // their own driver's).
  for (HardwareDevice& d : hw.devices) d.present = false;
  const std::vector<json> empty = Pool(hw);
  ASSERT_EQ(empty.size(), 1u);
  EXPECT_TRUE(empty[0]["devices"].empty());
}

TEST(DraPoolTest, TheApisLimitsAreRefusedNamingThem) {
  const std::vector<json> good = Pool(Trn2u());
  ASSERT_TRUE(CheckPool(good).ok());
  auto refused = [&](const std::function<void(std::vector<json>&)>& edit, const std::string& what) {
    std::vector<json> pool = good;
    edit(pool);
    const absl::Status s = CheckPool(pool);
    EXPECT_NE(std::string(s.message()).find(what), std::string::npos) << what << ": " << s;
  };
  refused([](auto& p) { p[1]["devices"] = json::array(); },
          "only one of Devices and SharedCounters");
  refused([](auto& p) { p[0].erase("devices"); }, "holds both or neither");
  refused(
      [](auto& p) {
        for (int i = 0; i < 8; ++i) {
          json set = p[1]["sharedCounters"][0];
          set["name"] = "set-" + std::to_string(i);
          p[1]["sharedCounters"].push_back(set);
        }
      },
      "ResourceSliceMaxCounterSets");
  refused(
      [](auto& p) {
        for (int i = 16; i < 33; ++i) {
          p[1]["sharedCounters"][0]["counters"]["neuron-" + std::to_string(i)] = {{"value", "4"}};
        }
      },
      "ResourceSliceMaxCountersPerCounterSet");
  refused(
      [](auto& p) {
        json& c = p[2]["devices"][0]["consumesCounters"];
        c.push_back(c[0]);
        c.push_back(c[0]);
      },
      "ResourceSliceMaxDeviceCounterConsumptionsPerDevice");
  refused(
      [](auto& p) {
        json& counters = p[0]["devices"][16]["consumesCounters"][0]["counters"];
        for (int i = 16; i < 33; ++i) counters["neuron-" + std::to_string(i)] = {{"value", "1"}};
      },
      "ResourceSliceMaxCountersPerDeviceCounterConsumption");
  refused([](auto& p) { p[2]["devices"][1] = p[0]["devices"][0]; },
          "neuron-0 is twice in the pool");
  refused(
      [](auto& p) {
        json extra = p[2]["devices"][0];
        extra["name"] = "neuroncore-999";
        p[2]["devices"].push_back(extra);
      },
      "ResourceSliceMaxDevicesWithTaintsOrConsumesCounters");
  refused([](auto& p) { p[2]["devices"][0]["consumesCounters"][0]["counterSet"] = "other"; },
          "counter set 'other', which the pool does not define");
  refused(
      [](auto& p) {
        p[2]["devices"][0]["consumesCounters"][0]["counters"] =
            json::parse(R"({"neuron-99": {"value": "1"}})");
      },
      "consumes counter neuron-99, which set neuron-devices does not hold");
  refused(
      [](auto& p) {
        p[1]["sharedCounters"][0]["counters"]["Neuron_0"] = {{"value", "1"}};
      },
      "counter name 'Neuron_0' is not a DNS label");
}

TEST(DraPoolTest, TheDocumentServesEverySliceAtOneGeneration) {
  SliceState state(kPartitionable, 500);
  Hardware hw = Trn2u();
  state.Update(*ViewOf(hw));
  json doc = json::parse(state.Get().body);
  ASSERT_EQ(doc["slices"].size(), 4u);  // devices, counters, 64 cores; the EFAs' pool
  for (const json& s : doc["slices"]) EXPECT_EQ(s["pool"]["generation"], 500);
  // A change in a core slice alone (a new NUMA node reported for device 15, which only its
  // cores and itself carry) bumps the pool's generation.
  hw.devices[15].numa = 0;
  state.Update(*ViewOf(hw));
  doc = json::parse(state.Get().body);
  EXPECT_EQ(doc["generation"], 501);
  for (const json& s : doc["slices"]) EXPECT_EQ(s["pool"]["generation"], 501);
}

// tests/fixtures/plugin/dra_pool_trn1.json; NEURON_UPDATE_GOLDENS=1 rewrites it.
TEST(DraPoolTest, GoldenTrn1) {
  const std::string actual = json(Pool(CatalogHardware("trn1.32xlarge"))).dump(1) + "\n";
  ::neuron::testing::ExpectGolden("plugin/dra_pool_trn1.json", actual);
}

}  // namespace
}  // namespace neuron::plugin::dra
