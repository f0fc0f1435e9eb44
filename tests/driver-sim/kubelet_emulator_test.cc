// The kubelet emulator against a scripted device plugin over real gRPC on Unix sockets: what the
// kubelet does on Register, with ListAndWatch, on admission (GetPreferredAllocation, Allocate,
// failures), in PodResources, across a restart and a new process. `neuron-sim pod run` through the
// real binary is in pod_run_test.cc.
#include "tests/driver-sim/kubelet_emulator_fixture.h"

namespace neuron::sim::kubelet_test {
namespace {

TEST_F(KubeletEmulatorTest, RejectsBadVersionAndNamesAndCountsEveryCall) {
  auto k = Start(Opts());
  TestPlugin p(PluginDir(), "test.sock", {"0"});
  p.Serve();
  grpc::Status s = p.Register(kResource, "v1alpha1");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNKNOWN);
  EXPECT_THAT(s.error_message(), HasSubstr("is not supported by kubelet"));
  for (const char* bad :
       {"neuron", "kubernetes.io/neuron", "node.kubernetes.io/x", "Example.com/dev", "example.com/",
        "example.com/-dev", "requests.example.com/dev", "a/b/c"}) {
    s = p.Register(bad);
    EXPECT_THAT(s.error_message(), HasSubstr("is invalid")) << bad;
  }
  EXPECT_EQ(p.options_calls, 0);  // rejected before any dial-back
  EXPECT_EQ(k->registrations(), 0u);
  EXPECT_EQ(k->register_calls(), 9u);
  EXPECT_TRUE(p.Register("aws.amazon.com/neuroncore").ok());
  EXPECT_EQ(k->registrations(), 1u);
}

TEST_F(KubeletEmulatorTest, DialBackTimesOutWhenTheEndpointNeverServes) {
  KubeletEmulator::Options o = Opts();
  o.dial_timeout = 400ms;
  auto k = Start(o);
  TestPlugin p(PluginDir(), "never.sock", {"0"});  // not served
  const auto start = std::chrono::steady_clock::now();
  grpc::Status s = p.Register();
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_THAT(s.error_message(), HasSubstr("failed to dial device plugin"));
  EXPECT_GE(took, 350ms);
  EXPECT_LT(took, 8s);
  EXPECT_FALSE(k->Resource(kResource).has_value());
}

TEST_F(KubeletEmulatorTest, OptionsBeforeRegisterReturnsAndCapacityTracksListAndWatch) {
  auto k = Start(Opts());
  TestPlugin p(PluginDir(), "test.sock", {"0", "1", "2", "3"});
  p.Serve();
  ASSERT_TRUE(p.Register().ok());
  EXPECT_EQ(p.options_calls, 1);  // synchronous, inside Register
  ASSERT_TRUE(WaitUntil([&] { return k->Resource(kResource)->capacity == 4; }, 10s));
  auto r = k->Resource(kResource);
  EXPECT_EQ(r->allocatable, 4);
  EXPECT_TRUE(r->connected);
  EXPECT_TRUE(r->get_preferred_allocation);
  EXPECT_EQ(r->endpoint, "test.sock");

  p.SetDevices({{"0", true}, {"1", false}, {"2", true}, {"3", true}});
  ASSERT_TRUE(WaitUntil([&] { return k->Resource(kResource)->allocatable == 3; }, 10s));
  EXPECT_EQ(k->Resource(kResource)->capacity, 4);
  EXPECT_FALSE(k->Resource(kResource)->devices.at("1"));
  p.SetDevices({{"0", true}, {"2", true}});  // every message is the whole list
  ASSERT_TRUE(WaitUntil([&] { return k->Resource(kResource)->capacity == 2; }, 10s));
  EXPECT_EQ(k->Resource(kResource)->allocatable, 2);
  EXPECT_GE(k->Resource(kResource)->updates, 3u);
}

TEST_F(KubeletEmulatorTest, StreamEndMarksAllUnhealthyAndGraceRemovesTheResource) {
  KubeletEmulator::Options o = Opts();
  o.grace_period = 1500ms;
  auto k = Start(o);
  auto p = Plugin(*k);
  p->Stop();
  ASSERT_TRUE(WaitUntil([&] { return !k->Resource(kResource)->connected; }, 10s));
  EXPECT_EQ(k->Resource(kResource)->allocatable, 0);
  EXPECT_EQ(k->Resource(kResource)->capacity, 4);
  // Re-registration inside the window restores allocatable.
  p = Plugin(*k);
  EXPECT_TRUE(k->Resource(kResource)->connected);
  p->Stop();
  ASSERT_TRUE(WaitUntil([&] { return !k->Resource(kResource)->connected; }, 10s));
  EXPECT_TRUE(WaitUntil([&] { return !k->Resource(kResource).has_value(); }, 10s));
}

TEST_F(KubeletEmulatorTest, AdmissionAsksPreferenceThenAllocatesIt) {
  auto k = Start(Opts());
  auto p = Plugin(*k);
  p->lock(), p->gpa_answer = {"2", "3"};
  absl::StatusOr<AdmittedPod> pod = k->AdmitPod(Pod("a", 2));
  ASSERT_TRUE(pod.ok()) << pod.status();
  ASSERT_EQ(pod->containers.size(), 1u);
  EXPECT_THAT(pod->containers[0].ids.at(kResource), ElementsAre("2", "3"));
  EXPECT_EQ(pod->containers[0].envs.at("NEURON_RT_VISIBLE_CORES"), "2,3");
  EXPECT_EQ(pod->containers[0].envs.at("NEURON_ROOT"), root_.str());
  EXPECT_EQ(pod->containers[0].envs.at("NEURON_SIM_DEVICE_MAP"), "2=2,3=3") << "host numbering";
  EXPECT_EQ(pod->containers[0].devices.size(), 2u);
  auto lock = p->lock();
  EXPECT_THAT(p->calls, ElementsAre("GetPreferredAllocation", "Allocate"));
  const auto& gpa = p->gpa_requests.at(0).container_requests(0);
  EXPECT_THAT(Strings(gpa.available_deviceids()), ElementsAre("0", "1", "2", "3"));
  EXPECT_TRUE(gpa.must_include_deviceids().empty());
  EXPECT_EQ(gpa.allocation_size(), 2);
  ASSERT_EQ(p->allocate_requests.at(0).container_requests_size(), 1);
  EXPECT_THAT(Strings(p->allocate_requests[0].container_requests(0).devices_ids()),
              ElementsAre("2", "3"));
  lock.unlock();
  EXPECT_EQ(InUse(*k), 2);
  // The second pod is offered only what is free.
  p->lock(), p->gpa_answer = {};
  ASSERT_TRUE(k->AdmitPod(Pod("b", 1)).ok());
  lock.lock();
  EXPECT_THAT(Strings(p->gpa_requests.at(1).container_requests(0).available_deviceids()),
              ElementsAre("0", "1"));
}

TEST_F(KubeletEmulatorTest, ShortOrInvalidPreferenceIsCompletedSilently) {
  auto k = Start(Opts());
  auto p = Plugin(*k);
  p->lock(), p->gpa_answer = {"1", "99"};  // one valid, one unknown, one short
  absl::StatusOr<AdmittedPod> pod = k->AdmitPod(Pod("a", 3));
  ASSERT_TRUE(pod.ok()) << pod.status();
  const std::vector<std::string>& ids = pod->containers[0].ids.at(kResource);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_NE(std::find(ids.begin(), ids.end(), "1"), ids.end());
  EXPECT_EQ(std::find(ids.begin(), ids.end(), "99"), ids.end());
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), 3u);
}

TEST_F(KubeletEmulatorTest, WithoutPreferenceTheKubeletChoosesAlone) {
  KubeletEmulator::Options o = Opts();
  o.use_preferred_allocation = false;
  auto k = Start(o);
  auto p = Plugin(*k);
  std::set<std::string> seen;
  for (const char* name : {"a", "b"}) {
    absl::StatusOr<AdmittedPod> r = k->AdmitPod(Pod(name, 2));
    ASSERT_TRUE(r.ok()) << r.status();
    for (const std::string& id : r->containers[0].ids.at(kResource)) seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 4u);  // disjoint
  auto lock = p->lock();
  EXPECT_TRUE(p->gpa_requests.empty());
  EXPECT_EQ(p->allocate_requests.size(), 2u);
}

TEST_F(KubeletEmulatorTest, FailedAdmissionsHoldNothing) {
  auto k = Start(Opts());
  auto p = Plugin(*k);
  absl::StatusOr<AdmittedPod> r = k->AdmitPod(Pod("big", 5));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string{r.status().message()}, HasSubstr("Insufficient example.com/dev"));
  EXPECT_THAT(std::string(k->AdmitPod(Pod("x", 1, "example.com/other")).status().message()),
              HasSubstr("Insufficient example.com/other"));

  p->lock(), p->gpa_error = grpc::Status(grpc::StatusCode::INTERNAL, "gpa broke");
  r = k->AdmitPod(Pod("g", 1));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnknown);
  EXPECT_THAT(std::string{r.status().message()}, HasSubstr("UnexpectedAdmissionError"));
  EXPECT_THAT(std::string{r.status().message()}, HasSubstr("gpa broke"));
  EXPECT_TRUE((p->lock(), p->allocate_requests.empty()));  // GPA error aborts before Allocate

  p->lock(), p->gpa_error = grpc::Status::OK;
  // Two containers: the second one's Allocate fails, the first one's devices are freed too.
  PodSpec two = Pod("two", 1);
  two.containers.push_back(ContainerSpec{.name = "side", .requests = {{kResource, 1}}});
  {
    auto lock = p->lock();
    p->allocate_error = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "unknown device IDs 7");
  }
  r = k->AdmitPod(two);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnknown);
  EXPECT_THAT(std::string{r.status().message()}, HasSubstr("unknown device IDs 7"));
  p->lock(), p->allocate_error = grpc::Status::OK;

  fs::remove(root_.path() / "dev" / "neuron2");  // the container runtime cannot find it
  p->lock(), p->gpa_answer = {"2"};
  r = k->AdmitPod(Pod("nodev", 1));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string{r.status().message()}, HasSubstr("\"/dev/neuron2\""));
  neuron::testing::WriteFile(root_.path() / "dev" / "neuron2", "");

  EXPECT_EQ(InUse(*k), 0);
  EXPECT_TRUE(k->Pods().empty());
  p->lock(), p->gpa_answer = {};
  EXPECT_TRUE(k->AdmitPod(Pod("all", 4)).ok());  // everything is free again

  p->SetDevices({{"0", false}, {"1", false}, {"2", false}, {"3", false}});
  ASSERT_TRUE(WaitUntil([&] { return k->Resource(kResource)->allocatable == 0; }, 10s));
  EXPECT_THAT(std::string(k->AdmitPod(Pod("sick", 1)).status().message()),
              HasSubstr("no healthy devices present; cannot allocate unhealthy devices"));
}

TEST_F(KubeletEmulatorTest, DeviceMapNamesTheHostDeviceBehindEachContainerNeuronNode) {
  fs::create_directories(root_.path() / "dev/infiniband");
  for (int i = 0; i < 4; ++i) {
    neuron::testing::WriteFile(root_.path() / "dev/infiniband" / ("uverbs" + std::to_string(i)),
                               "");
  }
  auto k = Start(Opts());
  auto p = Plugin(*k);
  {
    auto lock = p->lock();
    p->gpa_answer = {"3", "1"};
    p->container_numbering = true;
  }
  // A second resource whose device nodes are not Neuron's: they never enter the map.
  const std::string kOther = "example.com/efa";
  TestPlugin efa(PluginDir(), "efa.sock", {"0", "1", "2", "3"});
  efa.device_prefix = "/dev/infiniband/uverbs";
  efa.gpa_answer = {"2"};
  efa.Serve();
  ASSERT_TRUE(efa.Register(kOther).ok());
  ASSERT_TRUE(
      WaitUntil([&] { return k->Resource(kOther) && k->Resource(kOther)->allocatable == 4; }, 10s));

  PodSpec pod = Pod("both", 2);
  pod.containers[0].requests[kOther] = 1;
  absl::StatusOr<AdmittedPod> r = k->AdmitPod(pod);
  ASSERT_TRUE(r.ok()) << r.status();
  const ContainerAllocation& c = r->containers.at(0);
  EXPECT_THAT(c.devices, UnorderedElementsAre(DeviceSpecOut{"/dev/neuron0", "/dev/neuron1", "rw"},
                                              DeviceSpecOut{"/dev/neuron1", "/dev/neuron3", "rw"},
                                              DeviceSpecOut{"/dev/infiniband/uverbs2",
                                                            "/dev/infiniband/uverbs2", "rw"}));
  EXPECT_EQ(c.envs.at("NEURON_SIM_DEVICE_MAP"), "0=1,1=3");

  absl::StatusOr<AdmittedPod> only_efa = k->AdmitPod(Pod("efa-only", 1, kOther));
  ASSERT_TRUE(only_efa.ok()) << only_efa.status();
  EXPECT_FALSE(only_efa->containers.at(0).envs.contains("NEURON_SIM_DEVICE_MAP"))
      << "no Neuron device, no map";
  EXPECT_EQ(only_efa->containers.at(0).envs.at("NEURON_ROOT"), root_.str());

  // The map is derived from the recorded answers, so it survives a new emulator.
  efa.Stop();
  p->Stop();
  k.reset();
  k = Start(Opts());
  ASSERT_EQ(k->Pods().size(), 2u);
  EXPECT_EQ(k->Pods()[0].containers.at(0).envs.at("NEURON_SIM_DEVICE_MAP"), "0=1,1=3");
}

TEST_F(KubeletEmulatorTest, InitContainerDevicesAreReusedByAppContainers) {
  auto k = Start(Opts());
  auto p = Plugin(*k);
  p->lock(), p->gpa_answer = {"1", "2"};
  PodSpec pod;
  pod.name = "init";
  pod.containers.push_back(ContainerSpec{.name = "app", .requests = {{kResource, 3}}});
  pod.containers.push_back(
      ContainerSpec{.name = "setup", .requests = {{kResource, 2}}, .init = true});
  absl::StatusOr<AdmittedPod> r = k->AdmitPod(pod);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->containers.size(), 2u);
  EXPECT_EQ(r->containers[0].container, "setup");  // init containers first
  EXPECT_THAT(r->containers[0].ids.at(kResource), ElementsAre("1", "2"));
  const std::vector<std::string>& app = r->containers[1].ids.at(kResource);
  EXPECT_EQ(app.size(), 3u);
  EXPECT_NE(std::find(app.begin(), app.end(), "1"), app.end());
  EXPECT_NE(std::find(app.begin(), app.end(), "2"), app.end());
  EXPECT_EQ(InUse(*k), 3);
  auto lock = p->lock();
  ASSERT_EQ(p->gpa_requests.size(), 2u);
  const auto& second = p->gpa_requests[1].container_requests(0);
  EXPECT_THAT(Strings(second.must_include_deviceids()), ElementsAre("1", "2"));
  EXPECT_EQ(second.allocation_size(), 3);
  EXPECT_THAT(Strings(second.available_deviceids()), ElementsAre("0", "1", "2", "3"));
}

TEST_F(KubeletEmulatorTest, PodResourcesListGetAndAllocatableOverTheSocket) {
  auto k = Start(Opts());
  auto p = Plugin(*k);
  p->SetNuma({{"0", 0}, {"1", 0}, {"2", 1}, {"3", 1}});
  ASSERT_TRUE(WaitUntil([&] { return k->Resource(kResource)->numa.size() == 4; }, 10s));
  p->lock(), p->gpa_answer = {"2", "3"};
  ASSERT_TRUE(k->AdmitPod(Pod("a", 2)).ok());
  const std::string socket = (dir_.path() / "pod-resources" / "kubelet.sock").string();
  absl::StatusOr<PodAssignments> list = ListPodResources(socket, 5s);
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_NE(list->Holder(kResource, "2"), nullptr);
  EXPECT_EQ(list->Holder(kResource, "3")->pod_name, "a");
  EXPECT_EQ(list->Holder(kResource, "2")->container, "main");
  EXPECT_EQ(list->Holder(kResource, "0"), nullptr);

  auto stub = v1::PodResourcesLister::NewStub(
      grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()));
  grpc::ClientContext c1;
  v1::GetPodResourcesRequest get;
  get.set_pod_name("a");
  get.set_pod_namespace("default");
  v1::GetPodResourcesResponse got;
  ASSERT_TRUE(stub->Get(&c1, get, &got).ok());
  ASSERT_EQ(got.pod_resources().containers_size(), 1);
  std::vector<std::string> ids;
  for (const auto& d : got.pod_resources().containers(0).devices()) {
    ids.push_back(d.device_ids(0));
    EXPECT_EQ(d.topology().nodes(0).id(), 1);
  }
  EXPECT_THAT(ids, UnorderedElementsAre("2", "3"));
  grpc::ClientContext c2;
  get.set_pod_name("nope");
  EXPECT_EQ(stub->Get(&c2, get, &got).error_code(), grpc::StatusCode::NOT_FOUND);

  p->SetDevices({{"0", true}, {"1", false}, {"2", true}, {"3", true}});
  ASSERT_TRUE(WaitUntil([&] { return k->Resource(kResource)->allocatable == 3; }, 10s));
  grpc::ClientContext c3;
  v1::AllocatableResourcesResponse alloc;
  ASSERT_TRUE(stub->GetAllocatableResources(&c3, v1::AllocatableResourcesRequest(), &alloc).ok());
  ids.clear();
  for (const auto& d : alloc.devices())
    ids.insert(ids.end(), d.device_ids().begin(), d.device_ids().end());
  EXPECT_THAT(ids, UnorderedElementsAre("0", "2", "3"));
}

TEST_F(KubeletEmulatorTest, RestartDeletesSocketsKeepsPodsAndWaitsForReRegistration) {
  auto k = Start(Opts());
  auto p = Plugin(*k);
  p->lock(), p->gpa_answer = {"0"};
  ASSERT_TRUE(k->AdmitPod(Pod("a", 1)).ok());
  neuron::testing::WriteFile(PluginDir() / "DEPRECATION", "kept");
  ASSERT_TRUE(IsSocket(PluginDir() / "test.sock"));

  ASSERT_TRUE(k->Restart().ok());
  EXPECT_EQ(k->restarts(), 1u);
  EXPECT_FALSE(fs::exists(PluginDir() / "test.sock"));  // every socket deleted
  EXPECT_TRUE(fs::exists(PluginDir() / "DEPRECATION"));
  EXPECT_TRUE(IsSocket(PluginDir() / "kubelet.sock"));
  auto r = k->Resource(kResource);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->capacity, 0);
  EXPECT_FALSE(r->connected);
  ASSERT_EQ(k->Pods().size(), 1u);
  EXPECT_THAT(k->Pods()[0].containers[0].ids.at(kResource), ElementsAre("0"));
  EXPECT_EQ(k->Pods()[0].containers[0].envs.at("NEURON_RT_VISIBLE_CORES"), "0");
  EXPECT_EQ(InUse(*k), 1);

  p->Stop();  // the plugin notices and serves a new socket, then registers again
  p = Plugin(*k);
  EXPECT_EQ(k->registrations(), 2u);
  p->lock(), p->gpa_answer = {};
  absl::StatusOr<AdmittedPod> b = k->AdmitPod(Pod("b", 3));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_THAT(b->containers[0].ids.at(kResource), ElementsAre("1", "2", "3"));
}

TEST_F(KubeletEmulatorTest, CheckpointSurvivesANewEmulator) {
  std::string uid;
  {
    auto k = Start(Opts());
    auto p = Plugin(*k);
    p->lock(), p->gpa_answer = {"3"};
    absl::StatusOr<AdmittedPod> a = k->AdmitPod(Pod("a", 1));
    ASSERT_TRUE(a.ok());
    uid = a->uid;
  }
  const std::string text = neuron::testing::ReadFile(PluginDir() / "kubelet_internal_checkpoint");
  EXPECT_THAT(text, HasSubstr("\"PodDeviceEntries\""));
  EXPECT_THAT(text, HasSubstr("\"RegisteredDevices\""));
  EXPECT_THAT(text, HasSubstr("\"Checksum\""));
  {
    auto k = Start(Opts());
    ASSERT_EQ(k->Pods().size(), 1u);
    EXPECT_EQ(k->Pods()[0].uid, uid);
    EXPECT_THAT(k->Pods()[0].containers[0].ids.at(kResource), ElementsAre("3"));
    EXPECT_EQ(k->Pods()[0].containers[0].envs.at("NEURON_RT_VISIBLE_CORES"), "3");
    ASSERT_TRUE(k->Resource(kResource).has_value());
    EXPECT_EQ(k->Resource(kResource)->capacity, 0);
  }
  // A damaged checkpoint is not trusted: the node starts empty.
  std::string bad = text;
  bad[bad.find("\"3\"") + 1] = '2';
  neuron::testing::WriteFile(PluginDir() / "kubelet_internal_checkpoint", bad);
  auto k = Start(Opts());
  EXPECT_TRUE(k->Pods().empty());
}

}  // namespace
}  // namespace neuron::sim::kubelet_test
