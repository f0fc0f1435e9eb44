// The plugin's Allocate as a pure function of a NodeView (plugin/allocation.h), without gRPC or
// a simulated node: what each request gets, and each refusal with its whole message. The node is
// a trn1.32xlarge from the catalog (16 devices, 2 cores each, 8 EFA interfaces), device 5
// unhealthy and whole device 7 held by a neuroncore pod (so neuron "7" is masked).

#include "plugin/allocation.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tests/plugin/dra_testing.h"

namespace neuron::plugin {
namespace {

using dra::testing::CatalogHardware;

std::shared_ptr<const NodeView> TestView() {
  static const std::shared_ptr<const NodeView> view = [] {
    Hardware hw = CatalogHardware("trn1.32xlarge");
    hw.devices[5].healthy = false;
    hw.devices[5].reason = "state RESET";
    auto state = std::make_shared<NodeState>(std::chrono::milliseconds(60000));
    state->SetHardware(hw);
    PodDeviceAssignment held;
    held.resource = std::string(ResourceName(Resource::kNeuronCore));
    held.ids = {"14"};  // core 14 is on device 7
    state->SetPodAssignments(PodAssignments({held}), std::chrono::steady_clock::now());
    return state->view();
  }();
  return view;
}

v1beta1::AllocateRequest Request(const std::vector<std::vector<std::string>>& containers) {
  v1beta1::AllocateRequest r;
  for (const std::vector<std::string>& ids : containers) {
    auto* c = r.add_container_requests();
    for (const std::string& id : ids) c->add_devices_ids(id);
  }
  return r;
}

std::vector<std::string> Many(int n) {
  std::vector<std::string> ids;
  ids.reserve(n);
  for (int i = 0; i < n; ++i) ids.push_back(std::to_string(i));
  return ids;
}

struct Refusal {
  std::string name;
  Resource resource;
  std::vector<std::vector<std::string>> containers;
  NonContiguousPolicy policy;
  std::string message;  // the whole message
};

TEST(AllocateTest, EveryBadRequestIsRefusedWithAMessageNamingEachBadId) {
  const std::vector<Refusal> cases = {
      {"no container requests",
       Resource::kNeuron,
       {},
       NonContiguousPolicy::kWarn,
       "aws.amazon.com/neuron: Allocate without container requests"},
      {"empty request",
       Resource::kNeuron,
       {{}},
       NonContiguousPolicy::kWarn,
       "aws.amazon.com/neuron: container request 0: no device IDs"},
      {"unknown ids",
       Resource::kNeuron,
       {{"0", "99", "x"}},
       NonContiguousPolicy::kWarn,
       "aws.amazon.com/neuron: container request 0: unknown IDs \"99\", \"x\""},
      {"duplicate",
       Resource::kNeuron,
       {{"1", "1"}},
       NonContiguousPolicy::kWarn,
       "aws.amazon.com/neuron: container request 0: duplicate IDs \"1\""},
      {"duplicate across containers",
       Resource::kNeuron,
       {{"1"}, {"1"}},
       NonContiguousPolicy::kWarn,
       "aws.amazon.com/neuron: container request 1: duplicate IDs \"1\""},
      {"more than the node has",
       Resource::kNeuron,
       {Many(17)},
       NonContiguousPolicy::kWarn,
       "aws.amazon.com/neuron: container request 0: asks for 17 IDs, the node has 16; unknown "
       "IDs \"16\"; unhealthy IDs \"5\"; IDs \"7\" overlap devices held by another Neuron "
       "resource"},
      {"unhealthy device",
       Resource::kNeuron,
       {{"4", "5"}},
       NonContiguousPolicy::kWarn,
       "aws.amazon.com/neuron: container request 0: unhealthy IDs \"5\""},
      {"cores of an unhealthy device",
       Resource::kNeuronCore,
       {{"10", "11"}},
       NonContiguousPolicy::kWarn,
       "aws.amazon.com/neuroncore: container request 0: unhealthy IDs \"10\", \"11\""},
      {"device with a held core",
       Resource::kNeuron,
       {{"7"}},
       NonContiguousPolicy::kWarn,
       "aws.amazon.com/neuron: container request 0: IDs \"7\" overlap devices held by another "
       "Neuron resource"},
      {"noncontiguous under reject",
       Resource::kNeuron,
       {{"0", "2"}},
       NonContiguousPolicy::kReject,
       "aws.amazon.com/neuron: container request 0: IDs \"0\", \"2\" are not contiguous "
       "(noncontiguous policy: reject)"},
      {"unknown EFA",
       Resource::kEfa,
       {{"eth0"}},
       NonContiguousPolicy::kWarn,
       "vpc.amazonaws.com/efa: container request 0: unknown IDs \"eth0\""},
      {"every container's problem",
       Resource::kNeuron,
       {{"x"}, {"0"}, {"5"}},
       NonContiguousPolicy::kWarn,
       "aws.amazon.com/neuron: container request 0: unknown IDs \"x\"; container request 2: "
       "unhealthy IDs \"5\""},
  };
  const std::shared_ptr<const NodeView> view = TestView();
  for (const Refusal& c : cases) {
    absl::StatusOr<std::vector<ContainerPlan>> plans =
        ValidateAllocate(*view, c.resource, Request(c.containers), c.policy);
    ASSERT_FALSE(plans.ok()) << c.name;
    EXPECT_EQ(plans.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_EQ(plans.status().message(), c.message) << c.name;
  }
}

struct Grant {
  std::string name;
  Resource resource;
  std::vector<std::string> ids;
  DeviceNumbering numbering;
  bool noncontiguous;                        // flagged for the caller to log and count
  std::vector<std::string> host_paths;       // device specs, in order
  std::vector<std::string> container_paths;  // same order
  std::string visible_cores;                 // "" for EFA: no such variable
  std::vector<std::string> cdi;              // CDI device names: whole devices
};

std::vector<Grant> GrantCases() {
  return {
      {"two whole devices",
       Resource::kNeuron,
       {"1", "0"},
       DeviceNumbering::kHost,
       false,
       {"/dev/neuron0", "/dev/neuron1"},
       {"/dev/neuron0", "/dev/neuron1"},
       "0-3",
       {"aws.amazon.com/neuron=0", "aws.amazon.com/neuron=1"}},
      {"noncontiguous under warn",
       Resource::kNeuron,
       {"0", "2"},
       DeviceNumbering::kHost,
       true,
       {"/dev/neuron0", "/dev/neuron2"},
       {"/dev/neuron0", "/dev/neuron2"},
       "0-1,4-5",
       {"aws.amazon.com/neuron=0", "aws.amazon.com/neuron=2"}},
      {"renumbered devices",
       Resource::kNeuron,
       {"3", "4"},
       DeviceNumbering::kContainer,
       false,
       {"/dev/neuron3", "/dev/neuron4"},
       {"/dev/neuron0", "/dev/neuron1"},
       "0-3",
       {"aws.amazon.com/neuron=3", "aws.amazon.com/neuron=4"}},
      {"one core, host numbering",
       Resource::kNeuronCore,
       {"9"},
       DeviceNumbering::kHost,
       false,
       {"/dev/neuron4"},
       {"/dev/neuron4"},
       "9",
       {"aws.amazon.com/neuron=4"}},
      {"one core keeps its place in its device",
       Resource::kNeuronCore,
       {"9"},
       DeviceNumbering::kContainer,
       false,
       {"/dev/neuron4"},
       {"/dev/neuron0"},
       "1",
       {"aws.amazon.com/neuron=4"}},
      {"cores across two devices",
       Resource::kNeuronCore,
       {"3", "4"},
       DeviceNumbering::kContainer,
       false,
       {"/dev/neuron1", "/dev/neuron2"},
       {"/dev/neuron0", "/dev/neuron1"},
       "1-2",
       {"aws.amazon.com/neuron=1", "aws.amazon.com/neuron=2"}},
  };
}

TEST(AllocateTest, EachRequestGetsItsDevicesCoresAndCdiNames) {
  const std::vector<Grant> cases = GrantCases();
  const std::shared_ptr<const NodeView> view = TestView();
  for (const Grant& c : cases) {
    absl::StatusOr<std::vector<ContainerPlan>> plans =
        ValidateAllocate(*view, c.resource, Request({c.ids}), NonContiguousPolicy::kWarn);
    ASSERT_TRUE(plans.ok()) << c.name << ": " << plans.status();
    ASSERT_EQ(plans->size(), 1u) << c.name;
    EXPECT_EQ(plans->front().ids, c.ids) << c.name;
    EXPECT_EQ(plans->front().noncontiguous, c.noncontiguous) << c.name;
    const v1beta1::AllocateResponse r =
        BuildAllocateResponse(*view, c.resource, *plans, /*cdi=*/true, c.numbering);
    ASSERT_EQ(r.container_responses_size(), 1) << c.name;
    const v1beta1::ContainerAllocateResponse& out = r.container_responses(0);
    std::vector<std::string> host, container, cdi;
    for (const v1beta1::DeviceSpec& d : out.devices()) {
      host.push_back(d.host_path());
      container.push_back(d.container_path());
      EXPECT_EQ(d.permissions(), "rw") << c.name;
    }
    for (const v1beta1::CDIDevice& d : out.cdi_devices()) cdi.push_back(d.name());
    EXPECT_EQ(host, c.host_paths) << c.name;
    EXPECT_EQ(container, c.container_paths) << c.name;
    EXPECT_EQ(cdi, c.cdi) << c.name;
    const auto env = out.envs().find("NEURON_RT_VISIBLE_CORES");
    ASSERT_NE(env, out.envs().end()) << c.name;
    EXPECT_EQ(env->second, c.visible_cores) << c.name;
  }
}

TEST(AllocateTest, AnEfaRequestGetsItsUverbsNodesUnrenumbered) {
  const std::shared_ptr<const NodeView> view = TestView();
  ASSERT_GE(view->efas.size(), 2u);
  std::vector<std::string> names;
  for (const auto& [name, efa] : view->efas) names.push_back(name);
  const std::vector<std::string> ids = {names[1], names[0]};
  absl::StatusOr<std::vector<ContainerPlan>> plans =
      ValidateAllocate(*view, Resource::kEfa, Request({ids}), NonContiguousPolicy::kReject);
  ASSERT_TRUE(plans.ok()) << plans.status();
  const v1beta1::AllocateResponse r = BuildAllocateResponse(
      *view, Resource::kEfa, *plans, /*cdi=*/false, DeviceNumbering::kContainer);
  const auto& out = r.container_responses(0);
  ASSERT_EQ(out.devices_size(), 2);
  for (int i = 0; i < 2; ++i) {  // by name, whatever the request's order
    const std::string path =
        "/dev/infiniband/uverbs" + std::to_string(*view->efas.at(names[i]).uverbs);
    EXPECT_EQ(out.devices(i).host_path(), path);
    EXPECT_EQ(out.devices(i).container_path(), path);
  }
  EXPECT_EQ(out.cdi_devices_size(), 0);
  EXPECT_FALSE(out.envs().contains("NEURON_RT_VISIBLE_CORES"));
}

struct Preference {
  std::string name;
  Resource resource;
  std::vector<std::string> available;
  std::vector<std::string> must_include;
  int size;
  std::vector<std::string> expected;
};

TEST(AllocateTest, PreferencesNeverFailAndKeepWhatMustBeIncluded) {
  const std::vector<Preference> cases = {
      {"malformed and unknown ids are dropped",
       Resource::kNeuron,
       {"x", "-1", "007", "3", "4", "", "99999999999999"},
       {"zz", "4"},
       2,
       {"3", "4"}},
      {"best effort when too few exist", Resource::kNeuron, {"0"}, {}, 40, {"0"}},
      {"nothing asked, nothing given", Resource::kNeuron, {"0", "1"}, {}, 0, {}},
      {"two cores of one device",
       Resource::kNeuronCore,
       {"0", "1", "2", "3"},
       {"1"},
       2,
       {"0", "1"}},
  };
  const std::shared_ptr<const NodeView> view = TestView();
  for (const Preference& c : cases) {
    v1beta1::PreferredAllocationRequest req;
    auto* r = req.add_container_requests();
    for (const std::string& id : c.available) r->add_available_deviceids(id);
    for (const std::string& id : c.must_include) r->add_must_include_deviceids(id);
    r->set_allocation_size(c.size);
    const v1beta1::PreferredAllocationResponse resp = PreferredAllocation(*view, c.resource, req);
    ASSERT_EQ(resp.container_responses_size(), 1) << c.name;
    const auto& got = resp.container_responses(0).deviceids();
    EXPECT_EQ(std::vector<std::string>(got.begin(), got.end()), c.expected) << c.name;
  }
}

}  // namespace
}  // namespace neuron::plugin
