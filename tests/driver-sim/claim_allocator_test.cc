// The simulated scheduler's DRA allocation (driver-sim/controlplane/claim_allocator.h) on the
// claims docs/OPERATIONS.md#dra-claims documents: connected groups, EFAs beside their devices,
// taints, devices other claims hold, pools, config, and what it refuses.
#include "driver-sim/controlplane/claim_allocator.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "tests/driver-sim/dra_slice_fixture.h"

namespace neuron::sim::scheduler {
namespace {

using nlohmann::json;

constexpr char kDriver[] = "neuron.aws.com";

json DeviceClass(const std::string& name, const std::string& expression,
                 json config = json::array()) {
  return {{"metadata", {{"name", name}}},
          {"spec", {{"selectors", {{{"cel", {{"expression", expression}}}}}}, {"config", config}}}};
}

AllocationInput Node() {
  AllocationInput in;
  in.node_name = "node-a";
  in.slices = {Trn1Slice("node-a")};
  in.device_classes = {DeviceClass("neuron.aws.com", R"(device.driver == "neuron.aws.com" &&
          device.attributes["neuron.aws.com"].resourceType in ["neuron_device", "neuron_node"])"),
                       DeviceClass("efa.neuron.aws.com", R"(device.driver == "neuron.aws.com" &&
          device.attributes["neuron.aws.com"].resourceType == "efa")")};
  return in;
}

json Request(const std::string& name, const std::string& cls, int count) {
  return {
      {"name", name},
      {"exactly", {{"deviceClassName", cls}, {"allocationMode", "ExactCount"}, {"count", count}}}};
}

json Claim(json requests, json constraints = json::array(), json config = json::array()) {
  return {
      {"metadata", {{"name", "c"}, {"namespace", "default"}}},
      {"spec",
       {{"devices", {{"requests", requests}, {"constraints", constraints}, {"config", config}}}}}};
}

json Connected(int size, json requests = {"neurons"}) {
  return json::array(
      {{{"requests", requests},
        {"matchAttribute", "resource.aws.com/devicegroup" + std::to_string(size) + "_id"}}});
}

std::set<std::string> Devices(const json& allocation) {
  std::set<std::string> out;
  for (const json& r : allocation["devices"]["results"]) out.insert(r["device"].get<std::string>());
  return out;
}

json Holding(const std::set<std::string>& devices) {
  json results = json::array();
  for (const std::string& d : devices) {
    results.push_back({{"request", "r"}, {"driver", kDriver}, {"pool", "node-a"}, {"device", d}});
  }
  json claim;  // built by path: nested brace-lists of one pair read as arrays
  claim["status"]["allocation"]["devices"]["results"] = results;
  return claim;
}

TEST(ClaimAllocatorTest, FourConnectedDevicesComeFromOneGroup) {
  absl::StatusOr<json> a =
      AllocateClaim(Claim({Request("neurons", "neuron.aws.com", 4)}, Connected(4)), Node());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(Devices(*a), (std::set<std::string>{"neuron-0", "neuron-1", "neuron-2", "neuron-3"}));
  EXPECT_EQ((*a)["devices"]["results"][0]["pool"], "node-a");
  EXPECT_EQ((*a)["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"][0], "node-a");
}

// Device 1 and device 5 are held: groups 0 and 1 are broken, so the search moves to group 2.
TEST(ClaimAllocatorTest, HeldDevicesBreakTheirGroupAndTheSearchBacktracks) {
  AllocationInput in = Node();
  in.allocated_claims = {Holding({"neuron-1", "neuron-5"})};
  absl::StatusOr<json> a =
      AllocateClaim(Claim({Request("neurons", "neuron.aws.com", 4)}, Connected(4)), in);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(Devices(*a), (std::set<std::string>{"neuron-8", "neuron-9", "neuron-10", "neuron-11"}));
  in.allocated_claims = {Holding({"neuron-1", "neuron-5", "neuron-9", "neuron-13"})};
  a = AllocateClaim(Claim({Request("neurons", "neuron.aws.com", 4)}, Connected(4)), in);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kResourceExhausted) << a.status();
  EXPECT_NE(a.status().message().find("constraints"), std::string::npos) << a.status();
}

// Four connected devices and the two EFAs beside them, device 0 held: group 1 and its EFAs.
void ExpectEfasShareTheConstraint(AllocationInput in) {
  in.allocated_claims = {Holding({"neuron-0"})};
  absl::StatusOr<json> a = AllocateClaim(
      Claim({Request("neurons", "neuron.aws.com", 4), Request("efas", "efa.neuron.aws.com", 2)},
            Connected(4, {"neurons", "efas"})),
      in);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(Devices(*a), (std::set<std::string>{"neuron-4", "neuron-5", "neuron-6", "neuron-7",
                                                "efa-rdmap2", "efa-rdmap3"}));
  for (const json& r : (*a)["devices"]["results"]) {
    EXPECT_EQ(r["driver"],
              in.slices.size() > 1 && r["device"].get<std::string>().starts_with("efa-")
                  ? "efa.neuron.aws.com"
                  : "neuron.aws.com");
  }
}

TEST(ClaimAllocatorTest, EfasBesideTheirDevicesShareTheConstraint) {
  ExpectEfasShareTheConstraint(Node());
}

// AWS's DeviceClass selects by driver alone, and its 1x4 template asks for 4 devices of one
// devicegroup4_id. While the EFAs were devices of neuron.aws.com (they carry the group ids of the
// devices beside them) a group with two devices free was completed with two EFAs; as devices of
// efa.neuron.aws.com they never match the class, and the claim waits. Its all-devices template
// gets the 16 devices, not 24.
TEST(ClaimAllocatorTest, AwsClassNeverHandsAnEfaToANeuronRequest) {
  AllocationInput in = Node();
  in.device_classes = {DeviceClass("neuron.aws.com", R"(device.driver == "neuron.aws.com")")};
  in.allocated_claims = {Holding({"neuron-0", "neuron-1", "neuron-4", "neuron-8", "neuron-12"})};
  const json aws_1x4 = Claim({Request("neurons", "neuron.aws.com", 4)}, Connected(4));
  absl::StatusOr<json> before = AllocateClaim(aws_1x4, in);  // the EFAs in neuron.aws.com's pool
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(Devices(*before),
            (std::set<std::string>{"efa-rdmap0", "efa-rdmap1", "neuron-2", "neuron-3"}));
  in.slices = Trn1Pools("node-a");
  const absl::StatusOr<json> now = AllocateClaim(aws_1x4, in);
  EXPECT_EQ(now.status().code(), absl::StatusCode::kResourceExhausted) << now.status();
  json all = Request("neurons", "neuron.aws.com", 0);
  all["exactly"]["allocationMode"] = "All";
  all["exactly"].erase("count");
  in.allocated_claims.clear();
  const absl::StatusOr<json> every = AllocateClaim(Claim({all}), in);
  ASSERT_TRUE(every.ok()) << every.status();
  EXPECT_EQ(Devices(*every).size(), 16u);
}

// Our classes: EFAs of their own driver still pair with connected devices through the group ids.
TEST(ClaimAllocatorTest, EfasOfTheirOwnDriverShareTheConstraint) {
  AllocationInput in = Node();
  in.slices = Trn1Pools("node-a");
  in.device_classes[1] =
      DeviceClass("efa.neuron.aws.com", R"(device.driver == "efa.neuron.aws.com" &&
          device.attributes["efa.neuron.aws.com"].resourceType == "efa")");
  ExpectEfasShareTheConstraint(in);
}

TEST(ClaimAllocatorTest, TaintedDevicesAreLeftOutUnlessTolerated) {
  AllocationInput in = Node();
  in.slices[0]["spec"]["devices"][2]["taints"] = {{{"key", "neuron.aws.com/unhealthy"},
                                                   {"value", "uncorrected ECC"},
                                                   {"effect", "NoSchedule"}}};
  json claim = Claim({Request("neurons", "neuron.aws.com", 4)}, Connected(4));
  absl::StatusOr<json> a = AllocateClaim(claim, in);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(Devices(*a).count("neuron-2"), 0u);
  EXPECT_EQ(Devices(*a).count("neuron-4"), 1u);
  claim["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] = {
      {{"key", "neuron.aws.com/unhealthy"}, {"operator", "Exists"}}};
  a = AllocateClaim(claim, in);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(Devices(*a).count("neuron-2"), 1u);
}

TEST(ClaimAllocatorTest, TooFewDevicesNamesTheRequest) {
  absl::StatusOr<json> a = AllocateClaim(Claim({Request("neurons", "neuron.aws.com", 17)}), Node());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(a.status().message(),
            "request neurons: 16 matching free devices on node node-a, 17 needed");
}

TEST(ClaimAllocatorTest, AllTakesEveryMatchingDevice) {
  json r = Request("efas", "efa.neuron.aws.com", 0);
  r["exactly"]["allocationMode"] = "All";
  r["exactly"].erase("count");
  absl::StatusOr<json> a = AllocateClaim(Claim({r}), Node());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(Devices(*a).size(), 8u);
}

// Only the newest generation of a pool counts, and a pool missing slices is skipped.
TEST(ClaimAllocatorTest, PoolsCountOnlyWhenCompleteAndNewest) {
  AllocationInput in = Node();
  json newer = Trn1Slice("node-a", 2);
  newer["spec"]["devices"].erase(newer["spec"]["devices"].begin());  // neuron-0 went away
  in.slices.push_back(newer);
  absl::StatusOr<json> a = AllocateClaim(Claim({Request("neurons", "neuron.aws.com", 16)}), in);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kResourceExhausted) << "neuron-0 of generation 1";
  in.slices = {Trn1Slice("node-a")};
  in.slices[0]["spec"]["pool"]["resourceSliceCount"] = 2;
  a = AllocateClaim(Claim({Request("neurons", "neuron.aws.com", 1)}), in);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kResourceExhausted) << "an incomplete pool";
  in.slices = {Trn1Slice("node-b")};
  a = AllocateClaim(Claim({Request("neurons", "neuron.aws.com", 1)}), in);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kResourceExhausted) << "another node's slice";
}

TEST(ClaimAllocatorTest, ClassAndClaimConfigTravelWithTheAllocation) {
  AllocationInput in = Node();
  const json class_config = {
      {{"opaque", {{"driver", kDriver}, {"parameters", {{"kind", "Defaults"}}}}}}};
  in.device_classes[0]["spec"]["config"] = class_config;
  const json lnc = {
      {"apiVersion", "neuron.aws.com/v1"}, {"kind", "NeuronConfig"}, {"logicalNeuronCore", 1}};
  absl::StatusOr<json> a = AllocateClaim(
      Claim({Request("neurons", "neuron.aws.com", 1)}, json::array(),
            {{{"requests", {"neurons"}}, {"opaque", {{"driver", kDriver}, {"parameters", lnc}}}}}),
      in);
  ASSERT_TRUE(a.ok()) << a.status();
  const json& config = (*a)["devices"]["config"];
  ASSERT_EQ(config.size(), 2u);
  EXPECT_EQ(config[0]["source"], "FromClass");
  EXPECT_EQ(config[1]["source"], "FromClaim");
  EXPECT_EQ(config[1]["opaque"]["parameters"], lnc);
}

TEST(ClaimAllocatorTest, WhatItDoesNotOfferIsRefusedByName) {
  json first = {{"name", "neurons"}, {"firstAvailable", json::array()}};
  EXPECT_EQ(AllocateClaim(Claim({first}), Node()).status().message(),
            "request neurons: firstAvailable is not offered by the simulated scheduler");
  json r = Request("neurons", "neuron.aws.com", 1);
  r["exactly"]["selectors"] = {
      {{"cel", {{"expression", "device.attributes[\"neuron.aws.com\"].deviceId % 2 == 0"}}}}};
  absl::Status s = AllocateClaim(Claim({r}), Node()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'%' at column"), std::string::npos) << s;
  s = AllocateClaim(Claim({Request("neurons", "neuron.aws.com", 4)},
                          {{{"matchAttribute", "devicegroup4_id"}}}),
                    Node())
          .status();
  EXPECT_EQ(s.message(),
            "matchAttribute devicegroup4_id: not a fully qualified name (domain/name)");
  r = Request("neurons", "no-such-class", 1);
  EXPECT_EQ(AllocateClaim(Claim({r}), Node()).status().code(), absl::StatusCode::kNotFound);
  // A selector that fails on a device fails the allocation, as the reference's does.
  r = Request("neurons", "neuron.aws.com", 1);
  r["exactly"]["selectors"] = {
      {{"cel", {{"expression", "device.attributes[\"neuron.aws.com\"].model == \"x\""}}}}};
  EXPECT_EQ(AllocateClaim(Claim({r}), Node()).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// --- Partitionable devices: shared counters (tests/driver-sim/dra_slice_fixture.h's pool) ---

AllocationInput PartitionableNode(bool ultraserver = false) {
  AllocationInput in = Node();
  in.slices = Trn1PartitionablePool("node-a", ultraserver);
  in.device_classes.push_back(DeviceClass("neuroncore.neuron.aws.com",
                                          R"(device.driver == "neuron.aws.com" &&
          device.attributes["neuron.aws.com"].resourceType == "neuron_core")"));
  return in;
}

absl::StatusOr<json> Allocate(const AllocationInput& in, const std::string& cls, int count) {
  return AllocateClaim(Claim({Request("r", cls, count)}), in);
}

constexpr char kCores[] = "neuroncore.neuron.aws.com";

TEST(ClaimAllocatorCounters, TwoCoresOfOneDeviceAreFine) {
  absl::StatusOr<json> a = Allocate(PartitionableNode(), kCores, 2);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(Devices(*a), (std::set<std::string>{"neuroncore-0", "neuroncore-1"}));
  EXPECT_TRUE(Allocate(PartitionableNode(), kCores, 32).ok()) << "every core of the node";
}

// A device held: its cores are not free, whichever claim asks.
TEST(ClaimAllocatorCounters, ACoreIsNeverAllocatedBesideItsHeldDevice) {
  AllocationInput in = PartitionableNode();
  in.allocated_claims = {Holding({"neuron-0"})};
  absl::StatusOr<json> a = Allocate(in, kCores, 2);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(Devices(*a), (std::set<std::string>{"neuroncore-2", "neuroncore-3"}));
  a = Allocate(in, kCores, 31);
  EXPECT_EQ(a.status().message(), "request r: 30 matching free devices on node node-a, 31 needed");
}

// A core held: its device is not free (the other order).
TEST(ClaimAllocatorCounters, ADeviceIsNeverAllocatedBesideItsHeldCore) {
  AllocationInput in = PartitionableNode();
  in.allocated_claims = {Holding({"neuroncore-1"})};
  absl::StatusOr<json> a = Allocate(in, "neuron.aws.com", 1);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(Devices(*a), std::set<std::string>{"neuron-1"});
  a = Allocate(in, "neuron.aws.com", 16);
  EXPECT_EQ(a.status().message(), "request r: 15 matching free devices on node node-a, 16 needed");
  // The device's other core is still free: the counter holds 2, the held core takes 1.
  a = Allocate(in, kCores, 31);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(Devices(*a).count("neuroncore-0"), 1u);
}

// One claim asking for a device and cores: its own picks count against each other.
TEST(ClaimAllocatorCounters, OneClaimsDeviceAndCoresDoNotOverlap) {
  absl::StatusOr<json> a =
      AllocateClaim(Claim({Request("device", "neuron.aws.com", 1), Request("cores", kCores, 2)}),
                    PartitionableNode());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(Devices(*a), (std::set<std::string>{"neuron-0", "neuroncore-2", "neuroncore-3"}));
  a = AllocateClaim(Claim({Request("cores", kCores, 2), Request("device", "neuron.aws.com", 16)}),
                    PartitionableNode());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kResourceExhausted) << a.status();
  EXPECT_NE(a.status().message().find("shared counters"), std::string::npos) << a.status();
}

// Two cores of device 0 taken first: four connected devices cannot be group 0, and the search
// moves on to group 1 (backtracking across counters and a matchAttribute constraint).
TEST(ClaimAllocatorCounters, BacktrackingCrossesCounters) {
  absl::StatusOr<json> a =
      AllocateClaim(Claim({Request("cores", kCores, 2), Request("neurons", "neuron.aws.com", 4)},
                          Connected(4, {"neurons"})),
                    PartitionableNode());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(Devices(*a), (std::set<std::string>{"neuroncore-0", "neuroncore-1", "neuron-4",
                                                "neuron-5", "neuron-6", "neuron-7"}));
}

// neuron-node (an UltraServer node) consumes every device's counter whole.
TEST(ClaimAllocatorCounters, TheNodeDeviceExcludesEveryOtherDevice) {
  AllocationInput in = PartitionableNode(/*ultraserver=*/true);
  json node = Request("node", "neuron.aws.com", 1);
  node["exactly"]["selectors"] = {
      {{"cel",
        {{"expression", R"(device.attributes["neuron.aws.com"].resourceType == "neuron_node")"}}}}};
  absl::StatusOr<json> a = AllocateClaim(Claim({node}), in);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(Devices(*a), std::set<std::string>{"neuron-node"});
  for (const char* held : {"neuron-7", "neuroncore-31"}) {
    in.allocated_claims = {Holding({held})};
    EXPECT_EQ(AllocateClaim(Claim({node}), in).status().code(),
              absl::StatusCode::kResourceExhausted)
        << held;
  }
  in.allocated_claims = {Holding({"neuron-node"})};
  EXPECT_EQ(Allocate(in, "neuron.aws.com", 1).status().message(),
            "request r: 0 matching free devices on node node-a, 1 needed");
  EXPECT_FALSE(Allocate(in, kCores, 1).ok());
}

// Where the API server dropped the counters (DRAPartitionableDevices off), neuron-dra-api
// publishes the whole devices without consumesCounters and no cores: a core claim gets nothing.
TEST(ClaimAllocatorCounters, WithTheGateOffThereAreNoCores) {
  AllocationInput in = PartitionableNode();
  in.slices = {Trn1Slice("node-a")};
  EXPECT_EQ(Allocate(in, kCores, 1).status().message(),
            "request r: 0 matching free devices on node node-a, 1 needed");
  EXPECT_TRUE(Allocate(in, "neuron.aws.com", 16).ok());
}

// A device naming a counter set or counter the pool lacks makes the pool invalid, as the
// reference's pool gathering does: nothing of it is allocated, and the failure says why.
TEST(ClaimAllocatorCounters, AnUnknownCounterSetInvalidatesThePool) {
  AllocationInput in = PartitionableNode();
  in.slices[2]["spec"]["devices"][5]["consumesCounters"][0]["counterSet"] = "gone";
  absl::StatusOr<json> a = Allocate(in, "neuron.aws.com", 1);
  EXPECT_EQ(a.status().message(),
            "request r: 0 matching free devices on node node-a, 1 needed; pool "
            "neuron.aws.com/node-a is invalid: counter set gone not found");
  in = PartitionableNode();
  in.slices[0]["spec"]["devices"][0]["consumesCounters"][0]["counters"] = {
      {"neuron-99", {{"value", "2"}}}};
  a = Allocate(in, kCores, 1);
  EXPECT_NE(a.status().message().find("counter neuron-99 not found in counter set neuron-devices"),
            std::string::npos)
      << a.status();
}

}  // namespace
}  // namespace neuron::sim::scheduler
