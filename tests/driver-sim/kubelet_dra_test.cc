// The kubelet emulator's DRA side against a DRA plugin double over real gRPC
// (kubelet_dra_fixture.h): plugin registration accepted and refused with the kubelet's reasons,
// deregistration, NodePrepareResources before a pod starts and its per-claim error failing the
// pod, CDI specs applied to the pod's containers (and an ID without a spec refused), the claims in
// PodResources' dynamic_resources, NodeUnprepareResources once no pod uses a claim, and claims of
// running pods prepared again after a kubelet restart.
#include "tests/driver-sim/kubelet_dra_fixture.h"
#include "tests/driver-sim/kubelet_emulator_fixture.h"

namespace neuron::sim::kubelet_test {
namespace {

class KubeletDraTest : public KubeletDraTestBase {};

TEST_F(KubeletDraTest, RegistersADraPluginOnV1AndNotifiesIt) {
  std::unique_ptr<KubeletEmulator> k = StartRegistered();
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->DraPlugins().at("neuron.aws.com"),
            std::vector<std::string>{plugin_.dra_socket().string()});
  ASSERT_TRUE(WaitUntil([&] { return !plugin_.Statuses().empty(); }, 5s));
  EXPECT_TRUE(plugin_.Statuses()[0].plugin_registered());
  ASSERT_TRUE(k->AdmitPod(ClaimPod("p", {claim_})).ok());
  std::lock_guard lock(plugin_.state.mu);
  EXPECT_EQ(plugin_.state.prepares, (std::map<std::string, int>{{"v1", 1}}));
}

// The kubelet takes the first of the plugin's versions it knows, not its own preference.
TEST_F(KubeletDraTest, AnOlderPluginIsServedOnV1beta1) {
  plugin_.state.info.clear_supported_versions();
  plugin_.state.info.add_supported_versions("v1beta1.DRAPlugin");
  plugin_.state.info.add_supported_versions("v1.DRAPlugin");
  std::unique_ptr<KubeletEmulator> k = StartRegistered();
  ASSERT_TRUE(k->AdmitPod(ClaimPod("p", {claim_})).ok());
  std::lock_guard lock(plugin_.state.mu);
  EXPECT_EQ(plugin_.state.prepares, (std::map<std::string, int>{{"v1beta1", 1}}));
}

TEST_F(KubeletDraTest, ABadPluginInfoIsRefusedWithTheKubeletsReason) {
  struct Case {
    std::string type;
    std::vector<std::string> versions;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {"CSIPlugin", {"v1.DRAPlugin"}, "no handler registered for plugin type: CSIPlugin at socket"},
      {"DRAPlugin",
       {"v2.DRAPlugin"},
       "none of services supported by the plugin ([\"v2.DRAPlugin\"]) are supported by the kubelet "
       "([\"v1.DRAPlugin\" \"v1beta1.DRAPlugin\"])"},
      {"DRAPlugin", {}, "empty list of supported gRPC services (aka supported versions)"},
  };
  for (const Case& c : cases) {
    FakeDraPlugin plugin(dir_.path(), cdi_.path());
    plugin.state.info.set_type(c.type);
    plugin.state.info.clear_supported_versions();
    for (const std::string& v : c.versions) plugin.state.info.add_supported_versions(v);
    plugin.Serve();
    std::unique_ptr<KubeletEmulator> k = Start(DraOpts());
    ASSERT_TRUE(WaitUntil([&] { return !plugin.Statuses().empty(); }, 5s)) << c.type;
    const pluginregistration::RegistrationStatus status = plugin.Statuses()[0];
    EXPECT_FALSE(status.plugin_registered());
    EXPECT_THAT(status.error(), HasSubstr("RegisterPlugin error -- "));
    EXPECT_THAT(status.error(), HasSubstr(c.reason));
    EXPECT_TRUE(k->DraPlugins().empty());
    absl::StatusOr<AdmittedPod> pod = k->AdmitPod(ClaimPod("p", {claim_}));
    ASSERT_FALSE(pod.ok());
    EXPECT_THAT(std::string(pod.status().message()),
                HasSubstr("failed to get gRPC client for driver neuron.aws.com: DRA driver "
                          "neuron.aws.com is not registered"));
  }
}

TEST_F(KubeletDraTest, APluginThatGoesAwayIsDeregistered) {
  std::unique_ptr<KubeletEmulator> k = StartRegistered();
  plugin_.Stop();  // removes its registration socket
  EXPECT_TRUE(WaitUntil([&] { return k->DraPlugins().empty(); }, 5s));
  plugin_.Serve();
  EXPECT_TRUE(WaitUntil([&] { return k->DraPlugins().contains("neuron.aws.com"); }, 5s));
}

// Prepare before the containers start; the CDI spec the plugin wrote becomes the container's
// environment and device nodes; PodResources lists the claim's devices.
TEST_F(KubeletDraTest, PreparesBeforeStartAppliesCdiAndListsTheClaim) {
  plugin_.state.devices["uid-1"] = {"neuron-2", "neuron-3"};
  plugin_.state.env = {{"NEURON_RT_VISIBLE_CORES", "4-7"}};
  std::unique_ptr<KubeletEmulator> k = StartRegistered();
  absl::StatusOr<AdmittedPod> pod = k->AdmitPod(ClaimPod("llama-0", {claim_}));
  ASSERT_TRUE(pod.ok()) << pod.status();
  const ContainerAllocation& c = pod->containers.at(0);
  EXPECT_EQ(c.envs.at("NEURON_RT_VISIBLE_CORES"), "4-7");
  EXPECT_EQ(c.envs.at(std::string(kDeviceMapEnv)), "2=2,3=3");
  EXPECT_THAT(c.devices, UnorderedElementsAre(DeviceSpecOut{"/dev/neuron2", "/dev/neuron2", "rw"},
                                              DeviceSpecOut{"/dev/neuron3", "/dev/neuron3", "rw"}));
  EXPECT_THAT(c.cdi_devices, ElementsAre("aws.amazon.com/neuron=uid-1-neuron-2",
                                         "aws.amazon.com/neuron=uid-1-neuron-3"));

  absl::StatusOr<PodAssignments> list =
      ListPodResources((dir_.path() / "pod-resources/kubelet.sock").string(), 5s);
  ASSERT_TRUE(list.ok()) << list.status();
  const PodDeviceAssignment* holder = list->Holder("aws.amazon.com/neuron", "3");
  ASSERT_NE(holder, nullptr);
  EXPECT_EQ(holder->pod_name, "llama-0");
  EXPECT_EQ(holder->container, "main");
  ASSERT_TRUE(holder->claim.has_value());
  EXPECT_EQ(*holder->claim, (DraClaimDevice{"training",
                                            "llama-0-neurons",
                                            "neuron.aws.com",
                                            "node-1",
                                            "neuron-3",
                                            {"aws.amazon.com/neuron=uid-1-neuron-3"}}));
  EXPECT_NE(list->Holder("aws.amazon.com/neuron", "2"), nullptr);
}

TEST_F(KubeletDraTest, APrepareErrorFailsThePodWithTheDriversMessage) {
  plugin_.state.errors["uid-1"] = "device neuron-3 is unhealthy";
  std::unique_ptr<KubeletEmulator> k = StartRegistered();
  absl::StatusOr<AdmittedPod> pod = k->AdmitPod(ClaimPod("p", {claim_}));
  ASSERT_FALSE(pod.ok());
  EXPECT_EQ(pod.status().message(),
            "FailedPrepareDynamicResources: Failed to prepare dynamic resources: prepare dynamic "
            "resources: NodePrepareResources failed for ResourceClaim llama-0-neurons: device "
            "neuron-3 is unhealthy");
  EXPECT_TRUE(k->Pods().empty());
  // The pod never ran: its claim is released, and the name can be used again.
  EXPECT_THAT(Unprepared(), ElementsAre("uid-1"));
  plugin_.state.errors.clear();
  EXPECT_TRUE(k->AdmitPod(ClaimPod("p", {claim_})).ok());
}

TEST_F(KubeletDraTest, ACdiIdWithoutASpecIsAnErrorNamingIt) {
  plugin_.state.write_cdi = false;
  std::unique_ptr<KubeletEmulator> k = StartRegistered();
  absl::StatusOr<AdmittedPod> pod = k->AdmitPod(ClaimPod("p", {claim_}));
  ASSERT_FALSE(pod.ok());
  EXPECT_EQ(pod.status().message(),
            "CreateContainerError: failed to inject CDI devices: unresolvable CDI devices "
            "aws.amazon.com/neuron=uid-1-neuron-3");
  EXPECT_TRUE(k->Pods().empty());
}

// A claim shared by two pods is unprepared when the last of them stops, not before.
TEST_F(KubeletDraTest, UnpreparesAfterTheLastPodUsingTheClaimStops) {
  std::unique_ptr<KubeletEmulator> k = StartRegistered();
  ASSERT_TRUE(k->AdmitPod(ClaimPod("a", {claim_})).ok());
  ASSERT_TRUE(k->AdmitPod(ClaimPod("b", {claim_})).ok());
  {
    std::lock_guard lock(plugin_.state.mu);
    EXPECT_THAT(plugin_.state.prepared, ElementsAre("uid-1"));  // prepared once
  }
  ASSERT_TRUE(k->DeletePod("training", "a").ok());
  EXPECT_TRUE(Unprepared().empty());
  ASSERT_TRUE(k->DeletePod("training", "b").ok());
  EXPECT_THAT(Unprepared(), ElementsAre("uid-1"));
  EXPECT_FALSE(fs::exists(cdi_.path() / "uid-1.json"));
}

// A claim with devices of two drivers (Neuron devices and EFAs): each driver prepares its own,
// the container gets both, PodResources names each device's driver, and both unprepare.
TEST_F(KubeletDraTest, AClaimOfTwoDriversIsPreparedByEach) {
  FakeDraPlugin efa{dir_.path(), cdi_.path(), "efa.neuron.aws.com"};
  efa.state.devices["uid-1"] = {"neuron-1"};  // the fake's edits: a Neuron device node
  efa.Serve();
  plugin_.state.devices["uid-1"] = {"neuron-2"};
  std::unique_ptr<KubeletEmulator> k = StartRegistered();
  ASSERT_TRUE(WaitUntil([&] { return k->DraPlugins().contains("efa.neuron.aws.com"); }, 10s));
  ClaimRef both = claim_;
  both.drivers = {"neuron.aws.com", "efa.neuron.aws.com"};
  absl::StatusOr<AdmittedPod> pod = k->AdmitPod(ClaimPod("llama-0", {both}));
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_THAT(pod->containers.at(0).cdi_devices,
              UnorderedElementsAre("aws.amazon.com/neuron=uid-1-neuron-2",
                                   "aws.amazon.com/neuron=uid-1-neuron-1"));
  absl::StatusOr<PodAssignments> list =
      ListPodResources((dir_.path() / "pod-resources/kubelet.sock").string(), 5s);
  ASSERT_TRUE(list.ok()) << list.status();
  // A neuron-1 of another driver is not a Neuron device: listed as its driver reports it.
  EXPECT_NE(list->Holder("aws.amazon.com/neuron", "2"), nullptr);
  EXPECT_EQ(list->Holder("aws.amazon.com/neuron", "1"), nullptr);
  const PodDeviceAssignment* by_efa = list->Holder("efa.neuron.aws.com", "neuron-1");
  ASSERT_NE(by_efa, nullptr);
  ASSERT_TRUE(by_efa->claim.has_value());
  EXPECT_EQ(by_efa->claim->driver, "efa.neuron.aws.com");
  ASSERT_TRUE(k->DeletePod("training", "llama-0").ok());
  EXPECT_THAT(Unprepared(), ElementsAre("uid-1"));
  std::lock_guard lock(efa.state.mu);
  // Prepared at least once: the kubelet also prepares the claims of running pods again when a
  // driver registers, and the EFA driver's registration may be handled while the pod is admitted.
  EXPECT_THAT(efa.state.prepared, ::testing::Contains("uid-1"));
  EXPECT_THAT(efa.state.unprepared, ElementsAre("uid-1"));
}

// After a kubelet restart the claim cache comes back from dra_manager_state without "prepared";
// the running pod's claim is prepared again (idempotent on the plugin) and still listed.
TEST_F(KubeletDraTest, ARestartPreparesTheClaimsOfRunningPodsAgain) {
  std::unique_ptr<KubeletEmulator> k = StartRegistered();
  ASSERT_TRUE(k->AdmitPod(ClaimPod("llama-0", {claim_})).ok());
  ASSERT_TRUE(k->Restart().ok());
  {
    std::lock_guard lock(plugin_.state.mu);
    EXPECT_THAT(plugin_.state.prepared, ElementsAre("uid-1", "uid-1"));
  }
  absl::StatusOr<PodAssignments> list =
      ListPodResources((dir_.path() / "pod-resources/kubelet.sock").string(), 5s);
  ASSERT_TRUE(list.ok());
  ASSERT_NE(list->Holder("aws.amazon.com/neuron", "3"), nullptr);
  EXPECT_EQ(k->Pods().at(0).containers.at(0).envs.at(std::string(kDeviceMapEnv)), "3=3");
  // A new emulator process on the same directory (a kubelet that exited) does the same.
  k.reset();
  k = Start(DraOpts());
  ASSERT_NE(k, nullptr);
  {
    std::lock_guard lock(plugin_.state.mu);
    EXPECT_EQ(plugin_.state.prepared.size(), 3u);
  }
  ASSERT_TRUE(k->DeletePod("training", "llama-0").ok());
  EXPECT_THAT(Unprepared(), ElementsAre("uid-1"));
}

}  // namespace
}  // namespace neuron::sim::kubelet_test
