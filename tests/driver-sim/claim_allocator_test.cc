// The simulated scheduler's DRA allocation (driver-sim/scheduler/claim_allocator.h) on the
// claims docs/OPERATIONS.md#dra-claims documents: connected groups, EFAs beside their devices,
// taints, devices other claims hold, pools, config, and what it refuses.
#include "driver-sim/scheduler/claim_allocator.h"

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

TEST(ClaimAllocatorTest, EfasBesideTheirDevicesShareTheConstraint) {
  AllocationInput in = Node();
  in.allocated_claims = {Holding({"neuron-0"})};
  absl::StatusOr<json> a = AllocateClaim(
      Claim({Request("neurons", "neuron.aws.com", 4), Request("efas", "efa.neuron.aws.com", 2)},
            Connected(4, {"neurons", "efas"})),
      in);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(Devices(*a), (std::set<std::string>{"neuron-4", "neuron-5", "neuron-6", "neuron-7",
                                                "efa-rdmap2", "efa-rdmap3"}));
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

}  // namespace
}  // namespace neuron::sim::scheduler
