// NodeState (plugin/node_state.h) without gRPC or a simulated node: one trn1.32xlarge walked
// through hardware faults, Allocates, PodResources answers and the allocation grace, step by
// step, with what the kubelet's lists say after each step (docs/architecture.md#health,
// docs/kubelet-api.md#overlapping-resources).

#include "plugin/node_state.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "podresources/v1/api.pb.h"
#include "tests/plugin/dra_testing.h"

namespace neuron::plugin {
namespace {

using dra::testing::CatalogHardware;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr milliseconds kGrace{1000};

// What the kubelet sees of one ID: "Healthy", "Unhealthy" (hardware) or "Masked" (held by an
// overlapping resource, hardware healthy).
std::string Seen(const NodeView& view, Resource r, const std::string& id) {
  const ResourceDevice* d = view.Get(r).Find(id);
  if (d == nullptr) return "absent";
  if (d->healthy) return "Healthy";
  return d->hw_healthy ? (d->masked ? "Masked" : "?") : "Unhealthy";
}

PodAssignments Shows(const std::vector<std::pair<Resource, std::vector<std::string>>>& holdings) {
  std::vector<PodDeviceAssignment> all;
  for (const auto& [r, ids] : holdings) {
    PodDeviceAssignment a;
    a.pod_namespace = "default";
    a.pod_name = "p";
    a.resource = std::string(ResourceName(r));
    a.ids = ids;
    all.push_back(std::move(a));
  }
  return PodAssignments(std::move(all));
}

absl::Status Allocate(NodeState& state, Resource r, std::vector<std::string> ids) {
  return state
      .Commit(r, [&](const NodeView&) -> absl::StatusOr<std::vector<std::string>> { return ids; })
      .status();
}

struct Expect {
  Resource resource;
  std::string id;
  std::string seen;
};

struct Step {
  std::string name;
  std::function<void(NodeState&, Hardware&)> act;
  std::vector<Expect> expect;
  size_t pending;  // Allocates not yet confirmed by PodResources
};

// Faults and Allocates, PodResources not yet heard from.
std::vector<Step> AllocateSteps() {
  return {
      {"the catalog's hardware, all healthy",
       [](NodeState&, Hardware&) {},
       {{Resource::kNeuron, "0", "Healthy"},
        {Resource::kNeuronCore, "31", "Healthy"},
        {Resource::kNeuronDevice, "15", "Healthy"},
        {Resource::kNeuron, "16", "absent"},
        {Resource::kNeuronCore, "32", "absent"}},
       0},
      {"device 5 in reset: the device and its two cores, in every resource",
       [](NodeState& s, Hardware& hw) {
         hw.devices[5].healthy = false;
         hw.devices[5].reason = "state RESET";
         s.SetHardware(hw);
       },
       {{Resource::kNeuron, "5", "Unhealthy"},
        {Resource::kNeuronDevice, "5", "Unhealthy"},
        {Resource::kNeuronCore, "10", "Unhealthy"},
        {Resource::kNeuronCore, "11", "Unhealthy"},
        {Resource::kNeuronCore, "12", "Healthy"}},
       0},
      {"whole device 0 allocated: its cores are masked, the device stays listed healthy",
       [](NodeState& s, Hardware&) { ASSERT_TRUE(Allocate(s, Resource::kNeuron, {"0"}).ok()); },
       {{Resource::kNeuron, "0", "Healthy"},
        {Resource::kNeuronCore, "0", "Masked"},
        {Resource::kNeuronCore, "1", "Masked"},
        {Resource::kNeuronDevice, "0", "Masked"}},
       1},
      {"core 4 allocated: its device is masked for whole-device resources",
       [](NodeState& s, Hardware&) { ASSERT_TRUE(Allocate(s, Resource::kNeuronCore, {"4"}).ok()); },
       {{Resource::kNeuron, "2", "Masked"},
        {Resource::kNeuronDevice, "2", "Masked"},
        {Resource::kNeuronCore, "5", "Healthy"}},
       2},
      {"a refused Allocate holds nothing",
       [](NodeState& s, Hardware&) {
         const absl::Status refused =
             s.Commit(Resource::kNeuron, [](const NodeView&) {
                return absl::StatusOr<std::vector<std::string>>(absl::InvalidArgumentError("no"));
              }).status();
         EXPECT_EQ(refused.message(), "no");
       },
       {{Resource::kNeuronCore, "6", "Healthy"}},
       2},
  };
}

// PodResources speaks for the holdings, the grace runs out, the device recovers.
std::vector<Step> PodResourcesSteps(Clock::time_point t0) {
  return {
      {"PodResources shows both holdings: they stay, now on its word",
       [t0](NodeState& s, Hardware&) {
         s.SetPodAssignments(Shows({{Resource::kNeuron, {"0"}}, {Resource::kNeuronCore, {"4"}}}),
                             t0);
       },
       {{Resource::kNeuronCore, "0", "Masked"}, {Resource::kNeuron, "2", "Masked"}},
       0},
      {"PodResources no longer shows device 0: released",
       [t0](NodeState& s, Hardware&) {
         s.SetPodAssignments(Shows({{Resource::kNeuronCore, {"4"}}}), t0);
       },
       {{Resource::kNeuronCore, "0", "Healthy"},
        {Resource::kNeuronDevice, "0", "Healthy"},
        {Resource::kNeuron, "2", "Masked"}},
       0},
      {"device 8 allocated, not yet shown within the grace: still held",
       [](NodeState& s, Hardware&) {
         ASSERT_TRUE(Allocate(s, Resource::kNeuronDevice, {"8"}).ok());
         s.SetPodAssignments(Shows({{Resource::kNeuronCore, {"4"}}}), Clock::now());
       },
       {{Resource::kNeuronCore, "16", "Masked"}, {Resource::kNeuron, "8", "Masked"}},
       1},
      {"the grace over and still not shown (the pod failed admission): released",
       [](NodeState& s, Hardware&) {
         s.SetPodAssignments(Shows({{Resource::kNeuronCore, {"4"}}}),
                             Clock::now() + kGrace + milliseconds(1));
       },
       {{Resource::kNeuronCore, "16", "Healthy"}, {Resource::kNeuron, "8", "Healthy"}},
       0},
      {"device 5 back to READY: healthy again",
       [](NodeState& s, Hardware& hw) {
         hw.devices[5].healthy = true;
         hw.devices[5].reason.clear();
         s.SetHardware(hw);
       },
       {{Resource::kNeuron, "5", "Healthy"}, {Resource::kNeuronCore, "11", "Healthy"}},
       0},
  };
}

// The node's life in steps: what each does and what the lists say after it.
std::vector<Step> LifeSteps() {
  const Clock::time_point t0 = Clock::now();
  std::vector<Step> steps = AllocateSteps();
  for (Step& s : PodResourcesSteps(t0)) steps.push_back(std::move(s));
  return steps;
}

TEST(NodeStateTest, ListsFollowFaultsHoldingsAndReleases) {
  const std::vector<Step> steps = LifeSteps();
  NodeState state(kGrace);
  Hardware hw = CatalogHardware("trn1.32xlarge");
  state.SetHardware(hw);
  for (const Step& step : steps) {
    SCOPED_TRACE(step.name);
    step.act(state, hw);
    const std::shared_ptr<const NodeView> view = state.view();
    for (const Expect& e : step.expect) {
      EXPECT_EQ(Seen(*view, e.resource, e.id), e.seen) << ResourceName(e.resource) << " " << e.id;
    }
    EXPECT_EQ(state.pending_allocations(), step.pending);
  }
}

// A node runs the device plugin or the DRA driver, never both (docs/kubelet-api.md#dra), so a DRA
// claim in PodResources never meets a device-plugin grant on a real node. Where it does (the
// emulator's pods with claims beside a device plugin), the DRA entries AssignmentsFromList places
// count as holdings, like a grant of the same device or core: harmless, and pinned here so that
// changing it is a decision. `neuron-node` (no IDs) holds nothing here.
TEST(NodeStateTest, DraClaimDevicesCountAsHoldingsBecauseANodeRunsOneApi) {
  NodeState state(kGrace);
  state.SetHardware(CatalogHardware("trn1.32xlarge"));  // 2 cores per device
  v1::ListPodResourcesResponse list;
  v1::PodResources* pod = list.add_pod_resources();
  pod->set_name("p");
  pod->set_namespace_("default");
  v1::ContainerResources* c = pod->add_containers();
  c->set_name("main");
  v1::DynamicResource* dyn = c->add_dynamic_resources();
  dyn->set_claim_name("claim");
  dyn->set_claim_namespace("default");
  for (const char* device : {"neuron-3", "neuroncore-10", "neuron-node"}) {
    v1::ClaimResource* r = dyn->add_claim_resources();
    r->set_driver_name("neuron.aws.com");
    r->set_pool_name("node-a");
    r->set_device_name(device);
  }
  state.SetPodAssignments(AssignmentsFromList(list), Clock::now());
  const std::shared_ptr<const NodeView> view = state.view();
  EXPECT_EQ(Seen(*view, Resource::kNeuronCore, "6"), "Masked");  // device 3's cores
  EXPECT_EQ(Seen(*view, Resource::kNeuronCore, "7"), "Masked");
  EXPECT_EQ(Seen(*view, Resource::kNeuron, "5"), "Masked");  // core 10's device
  EXPECT_EQ(Seen(*view, Resource::kNeuron, "4"), "Healthy");
  EXPECT_EQ(Seen(*view, Resource::kNeuronCore, "0"), "Healthy");
}

TEST(NodeStateTest, OnlyAChangePublishesAView) {
  NodeState state(kGrace);
  std::vector<uint64_t> heard;
  state.AddListener(
      [&](const std::shared_ptr<const NodeView>& v) { heard.push_back(v->generation); });
  Hardware hw = CatalogHardware("trn1.32xlarge");
  state.SetHardware(hw);
  ASSERT_EQ(heard.size(), 1u);
  const uint64_t first = state.view()->generation;
  EXPECT_EQ(heard.back(), first);

  state.SetHardware(hw);                                    // the same picture
  state.SetPodAssignments(PodAssignments(), Clock::now());  // nothing held, as before
  EXPECT_EQ(heard.size(), 1u);
  EXPECT_EQ(state.view()->generation, first);

  hw.efas[0].healthy = false;
  hw.efas[0].reason = "port DOWN";
  state.SetHardware(hw);
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_GT(heard.back(), first);
  EXPECT_EQ(Seen(*state.view(), Resource::kEfa, hw.efas[0].name), "Unhealthy");
}

}  // namespace
}  // namespace neuron::plugin
