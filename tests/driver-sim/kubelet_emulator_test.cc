// The kubelet emulator against a scripted device plugin over real gRPC on Unix sockets: what the
// kubelet does on Register, with ListAndWatch, on admission (GetPreferredAllocation, Allocate,
// failures), in PodResources, across a restart and a new process; and `neuron-sim kubelet` /
// `neuron-sim pod run -- CMD` through the real binary.
#include "driver-sim/kubelet/kubelet_emulator.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <sstream>

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "podresources/v1/api.grpc.pb.h"
#include "proto/pod_resources.h"
#include "tests/support/process.h"
#include "tests/support/sim_node.h"
#include "tests/support/sim_testing.h"
#include "tests/support/temp_dir.h"

namespace neuron::sim {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using neuron::testing::TempDir;
using neuron::testing::WaitUntil;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

constexpr char kResource[] = "example.com/dev";

// A device plugin with scripted health and answers that records what the kubelet asked.
class TestPlugin final : public v1beta1::DevicePlugin::Service {
 public:
  TestPlugin(fs::path plugin_dir, std::string socket_name, std::vector<std::string> ids)
      : dir_(std::move(plugin_dir)), socket_name_(std::move(socket_name)) {
    for (const std::string& id : ids) health_.emplace_back(id, true);
  }
  ~TestPlugin() override { Stop(); }

  void Serve() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + (dir_ / socket_name_).string(),
                             grpc::InsecureServerCredentials());
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void Stop() {
    if (!server_) return;
    {
      std::lock_guard lock(mu_);
      ++version_;
    }
    cv_.notify_all();
    server_->Shutdown(std::chrono::system_clock::now() + 200ms);
    server_->Wait();
    server_.reset();
  }
  grpc::Status Register(const std::string& resource = kResource,
                        const std::string& version = "v1beta1") {
    auto stub = v1beta1::Registration::NewStub(grpc::CreateChannel(
        "unix:" + (dir_ / "kubelet.sock").string(), grpc::InsecureChannelCredentials()));
    v1beta1::RegisterRequest request;
    request.set_version(version);
    request.set_endpoint(socket_name_);
    request.set_resource_name(resource);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 20s);
    v1beta1::Empty reply;
    return stub->Register(&context, request, &reply);
  }
  // Replaces the device list (id -> healthy); ListAndWatch sends it at once.
  void SetDevices(std::vector<std::pair<std::string, bool>> health) {
    {
      std::lock_guard lock(mu_);
      health_ = std::move(health);
      ++version_;
    }
    cv_.notify_all();
  }
  void SetNuma(std::map<std::string, int> numa) {
    {
      std::lock_guard lock(mu_);
      numa_ = std::move(numa);
      ++version_;
    }
    cv_.notify_all();
  }

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* out) override {
    ++options_calls;
    out->set_get_preferred_allocation_available(offer_gpa);
    return grpc::Status::OK;
  }
  grpc::Status ListAndWatch(grpc::ServerContext* context, const v1beta1::Empty*,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override {
    std::unique_lock lock(mu_);
    uint64_t sent = 0;
    while (!context->IsCancelled() && server_) {
      if (sent != version_) {
        sent = version_;
        v1beta1::ListAndWatchResponse r;
        for (const auto& [id, ok] : health_) {
          v1beta1::Device* d = r.add_devices();
          d->set_id(id);
          d->set_health(ok ? "Healthy" : "Unhealthy");
          if (auto n = numa_.find(id); n != numa_.end()) {
            d->mutable_topology()->add_nodes()->set_id(n->second);
          }
        }
        lock.unlock();
        if (!writer->Write(r)) return grpc::Status::OK;
        lock.lock();
      }
      cv_.wait_for(lock, 50ms);
    }
    return grpc::Status::OK;
  }
  grpc::Status GetPreferredAllocation(grpc::ServerContext*,
                                      const v1beta1::PreferredAllocationRequest* request,
                                      v1beta1::PreferredAllocationResponse* out) override {
    std::lock_guard lock(mu_);
    gpa_requests.push_back(*request);
    calls.push_back("GetPreferredAllocation");
    if (!gpa_error.ok()) return gpa_error;
    for (int i = 0; i < request->container_requests_size(); ++i) {
      auto* r = out->add_container_responses();
      for (const std::string& id : gpa_answer) r->add_deviceids(id);
    }
    return grpc::Status::OK;
  }
  grpc::Status Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* request,
                        v1beta1::AllocateResponse* out) override {
    std::lock_guard lock(mu_);
    allocate_requests.push_back(*request);
    calls.push_back("Allocate");
    if (!allocate_error.ok()) return allocate_error;
    for (const auto& c : request->container_requests()) {
      auto* r = out->add_container_responses();
      std::vector<std::string> ids(c.devices_ids().begin(), c.devices_ids().end());
      std::sort(ids.begin(), ids.end());
      std::string joined;
      for (size_t k = 0; k < ids.size(); ++k) {
        joined += (joined.empty() ? "" : ",") + ids[k];
        auto* d = r->add_devices();
        d->set_container_path(device_prefix + (container_numbering ? std::to_string(k) : ids[k]));
        d->set_host_path(device_prefix + ids[k]);
        d->set_permissions("rw");
      }
      (*r->mutable_envs())["NEURON_RT_VISIBLE_CORES"] = joined;
    }
    return grpc::Status::OK;
  }

  // Script and record; read and written under lock() by tests while the emulator runs.
  std::unique_lock<std::mutex> lock() { return std::unique_lock(mu_); }
  std::atomic<int> options_calls{0};
  bool offer_gpa = true;
  std::vector<std::string> gpa_answer;
  grpc::Status gpa_error;
  grpc::Status allocate_error;
  // Allocate names host device PREFIX<id>, seen in the container under the same path, or as
  // PREFIX<k> for the k-th ID (ascending) with container numbering (the device plugin's
  // device_numbering: container, docs/architecture.md#device-numbering).
  std::string device_prefix = "/dev/neuron";
  bool container_numbering = false;
  std::vector<v1beta1::PreferredAllocationRequest> gpa_requests;
  std::vector<v1beta1::AllocateRequest> allocate_requests;
  std::vector<std::string> calls;

 private:
  const fs::path dir_;
  const std::string socket_name_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<std::string, bool>> health_;
  std::map<std::string, int> numa_;
  uint64_t version_ = 1;
  std::unique_ptr<grpc::Server> server_;
};

std::vector<std::string> Strings(const google::protobuf::RepeatedPtrField<std::string>& r) {
  std::vector<std::string> v(r.begin(), r.end());
  std::sort(v.begin(), v.end());
  return v;
}

class KubeletEmulatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(root_.path() / "dev");
    for (int i = 0; i < 4; ++i)
      neuron::testing::WriteFile(root_.path() / "dev" / ("neuron" + std::to_string(i)), "");
  }
  KubeletEmulator::Options Opts() {
    KubeletEmulator::Options o;
    o.kubelet_dir = dir_.str();
    o.root = root_.str();
    o.rpc_deadline = 10s;
    o.dial_timeout = 5s;
    o.seed = 42;
    return o;
  }
  std::unique_ptr<KubeletEmulator> Start(KubeletEmulator::Options o) {
    absl::StatusOr<std::unique_ptr<KubeletEmulator>> k = KubeletEmulator::Start(std::move(o));
    EXPECT_TRUE(k.ok()) << k.status();
    return k.ok() ? std::move(*k) : nullptr;
  }
  fs::path PluginDir() const { return dir_.path() / "device-plugins"; }
  // A plugin with devices 0..3 registered and its first list consumed.
  std::unique_ptr<TestPlugin> Plugin(KubeletEmulator& k, std::string socket = "test.sock") {
    auto p = std::make_unique<TestPlugin>(PluginDir(), socket,
                                          std::vector<std::string>{"0", "1", "2", "3"});
    p->Serve();
    grpc::Status s = p->Register();
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_TRUE(WaitUntil(
        [&] {
          auto r = k.Resource(kResource);
          return r && r->capacity == 4 && r->allocatable == 4;
        },
        10s));
    return p;
  }
  static PodSpec Pod(const std::string& name, int count, const std::string& res = kResource) {
    PodSpec pod;
    pod.name = name;
    pod.containers.push_back(ContainerSpec{.name = "main", .requests = {{res, count}}});
    return pod;
  }
  static int InUse(KubeletEmulator& k) {
    return k.Resource(kResource).value_or(ResourceState{}).in_use;
  }

  TempDir dir_{"kubelet"};
  TempDir root_{"root"};
};

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
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("Insufficient example.com/dev"));
  EXPECT_THAT(std::string(k->AdmitPod(Pod("x", 1, "example.com/other")).status().message()),
              HasSubstr("Insufficient example.com/other"));

  p->lock(), p->gpa_error = grpc::Status(grpc::StatusCode::INTERNAL, "gpa broke");
  r = k->AdmitPod(Pod("g", 1));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnknown);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("UnexpectedAdmissionError"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("gpa broke"));
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
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("unknown device IDs 7"));
  p->lock(), p->allocate_error = grpc::Status::OK;

  fs::remove(root_.path() / "dev" / "neuron2");  // the container runtime cannot find it
  p->lock(), p->gpa_answer = {"2"};
  r = k->AdmitPod(Pod("nodev", 1));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("\"/dev/neuron2\""));
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

bool IsSocket(const fs::path& p) { return fs::is_socket(fs::symlink_status(p)); }

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

// ---- the real binary -------------------------------------------------------------------------

TEST_F(KubeletEmulatorTest, PodRunThroughTheBinaryRunsTheCommandWithThePodsEnvironment) {
  const fs::path logs = dir_.path() / "logs";
  fs::create_directories(logs);
  // pod run runs CMD under the simulated driver (`neuron-sim exec`), which needs a running node
  // whose devices 2 and 3 back the plugin's answers.
  TempDir node{"node"};
  neuron::testing::SimNode sim({.sim_bin = NEURON_SIM_BIN,
                                .root = node.path(),
                                .logs = logs,
                                .on_stop = neuron::testing::ExpectCleanExit});
  ASSERT_TRUE(sim.Up("inf2.24xlarge")) << sim.Log();
  const pid_t kubelet = neuron::testing::Spawn(
      {NEURON_SIM_BIN, "kubelet", "--root", node.str(), "--kubelet-dir", dir_.str()},
      logs / "kubelet.out", logs / "kubelet.err");
  ASSERT_GT(kubelet, 0);
  ASSERT_TRUE(WaitUntil([&] { return IsSocket(dir_.path() / "neuron-sim-kubelet.sock"); }, 20s))
      << neuron::testing::ReadFile(logs / "kubelet.err");
  TestPlugin p(PluginDir(), "cores.sock", {"0", "1", "2", "3"});
  p.gpa_answer = {"2", "3"};
  p.Serve();
  ASSERT_TRUE(p.Register("aws.amazon.com/neuroncore").ok());

  auto run = [&](std::vector<std::string> args, const std::string& tag) {
    args.insert(args.begin(), NEURON_SIM_BIN);
    const pid_t pid = neuron::testing::Spawn(args, logs / (tag + ".out"), logs / (tag + ".err"));
    return pid;
  };
  std::optional<int> code;
  ASSERT_TRUE(WaitUntil(
      [&] {
        code = neuron::testing::WaitExit(
            run({"kubelet", "status", "--kubelet-dir", dir_.str()}, "st"), 20s);
        return neuron::testing::ReadFile(logs / "st.out").find("capacity=4") != std::string::npos;
      },
      20s));
  EXPECT_EQ(code, 0);

  // CMD runs under the simulated driver (`neuron-sim exec`: its interposer is preloaded).
  pid_t pid = run({"pod", "run", "--kubelet-dir", dir_.str(), "--name", "job", "--request",
                   "aws.amazon.com/neuroncore=2", "--", "sh", "-c",
                   "echo cores=$NEURON_RT_VISIBLE_CORES root=$NEURON_ROOT "
                   "map=$NEURON_SIM_DEVICE_MAP preload=$LD_PRELOAD; exit 7"},
                  "run");
  EXPECT_EQ(neuron::testing::WaitExit(pid, 30s), 7) << neuron::testing::ReadFile(logs / "run.err");
  const std::string job_out = neuron::testing::ReadFile(logs / "run.out");
  EXPECT_THAT(job_out, HasSubstr("cores=2,3 root=" + node.str() + " map=2=2,3=3 preload="));
  EXPECT_THAT(job_out, ::testing::ContainsRegex("preload=[^ ]*\\.so"))
      << "not run through neuron-sim exec";
  EXPECT_THAT(neuron::testing::ReadFile(logs / "run.err"),
              HasSubstr("aws.amazon.com/neuroncore 2 3"));
  EXPECT_THAT(neuron::testing::ReadFile(logs / "run.err"),
              HasSubstr("NEURON_SIM_DEVICE_MAP=2=2,3=3"));
  EXPECT_EQ(neuron::testing::WaitExit(run({"pod", "list", "--kubelet-dir", dir_.str()}, "ls"), 20s),
            0);
  EXPECT_EQ(neuron::testing::ReadFile(logs / "ls.out"), "");  // deleted after CMD

  // SIGTERM to pod run reaches CMD; the pod is deleted after.
  pid = run({"pod", "run", "--kubelet-dir", dir_.str(), "--name", "long", "--request",
             "aws.amazon.com/neuroncore=1", "--", "sh", "-c",
             "trap 'exit 3' TERM; echo up; while :; do sleep 0.1; done"},
            "long");
  ASSERT_TRUE(WaitUntil(
      [&] { return neuron::testing::ReadFile(logs / "long.out").find("up") != std::string::npos; },
      20s));
  kill(pid, SIGTERM);
  EXPECT_EQ(neuron::testing::WaitExit(pid, 20s), 3);
  EXPECT_EQ(
      neuron::testing::WaitExit(run({"pod", "list", "--kubelet-dir", dir_.str()}, "ls2"), 20s), 0);
  EXPECT_EQ(neuron::testing::ReadFile(logs / "ls2.out"), "");

  // A CMD that cannot be run: 127, as a shell says.
  pid = run({"pod", "run", "--kubelet-dir", dir_.str(), "--name", "absent", "--request",
             "aws.amazon.com/neuroncore=1", "--", (dir_.path() / "no-such-command").string()},
            "absent");
  EXPECT_EQ(neuron::testing::WaitExit(pid, 20s), 127)
      << neuron::testing::ReadFile(logs / "absent.err");

  // Without CMD the pod stays until `pod delete`; an admission error exits 1 with the message.
  EXPECT_EQ(neuron::testing::WaitExit(run({"pod", "run", "--kubelet-dir", dir_.str(), "--name",
                                           "stay", "--request", "aws.amazon.com/neuroncore=1"},
                                          "stay"),
                                      20s),
            0);
  EXPECT_EQ(neuron::testing::WaitExit(run({"pod", "run", "--kubelet-dir", dir_.str(), "--name",
                                           "huge", "--request", "aws.amazon.com/neuroncore=9"},
                                          "huge"),
                                      20s),
            1);
  EXPECT_THAT(neuron::testing::ReadFile(logs / "huge.err"),
              HasSubstr("Insufficient aws.amazon.com/neuroncore"));
  EXPECT_EQ(
      neuron::testing::WaitExit(run({"pod", "list", "--kubelet-dir", dir_.str()}, "ls3"), 20s), 0);
  EXPECT_THAT(neuron::testing::ReadFile(logs / "ls3.out"),
              HasSubstr("default/stay main aws.amazon.com/neuroncore"));
  EXPECT_EQ(neuron::testing::WaitExit(
                run({"pod", "delete", "--kubelet-dir", dir_.str(), "--name", "stay"}, "del"), 20s),
            0);
  EXPECT_EQ(neuron::testing::WaitExit(
                run({"pod", "delete", "--kubelet-dir", dir_.str(), "--name", "stay"}, "del2"), 20s),
            1);
  EXPECT_EQ(neuron::testing::WaitExit(run({"pod", "run", "--kubelet-dir", dir_.str(), "--name", "x",
                                           "--request", "nonsense"},
                                          "usage"),
                                      20s),
            2);

  EXPECT_EQ(neuron::testing::WaitExit(
                run({"kubelet", "restart", "--kubelet-dir", dir_.str()}, "rs"), 30s),
            0);
  EXPECT_FALSE(fs::exists(PluginDir() / "cores.sock"));
  EXPECT_EQ(neuron::testing::Stop(kubelet, 20s), 0);
  EXPECT_FALSE(fs::exists(PluginDir() / "kubelet.sock"));
  EXPECT_FALSE(fs::exists(dir_.path() / "neuron-sim-kubelet.sock"));
}

// ---- stopping pods (`pod run` and `pod delete` through the binary, the emulator in-process) -----

// A node, this emulator serving its control socket, and a plugin with devices 0..3, for
// `neuron-sim pod run -- CMD` under the simulated driver. Holdings are read from the emulator.
class PodStopTest : public KubeletEmulatorTest {
 protected:
  void SetUp() override {
    fs::create_directories(logs_);
    ASSERT_TRUE(sim_.Up("inf2.24xlarge")) << sim_.Log();
    KubeletEmulator::Options o = Opts();
    o.root = node_.str();
    k_ = Start(o);
    ASSERT_NE(k_, nullptr);
    plugin_ = Plugin(*k_);
  }
  // Starts `neuron-sim pod run` for pod NAME with CMD; its output in logs/NAME.out and .err.
  pid_t PodRun(const std::string& name, const std::string& grace, const std::string& script) {
    return neuron::testing::Spawn({NEURON_SIM_BIN, "pod", "run", "--kubelet-dir", dir_.str(),
                                   "--name", name, "--grace-period", grace, "--request",
                                   std::string(kResource) + "=1", "--", "sh", "-c", script},
                                  logs_ / (name + ".out"), logs_ / (name + ".err"));
  }
  pid_t PodDelete(const std::string& name, const std::string& grace) {
    return neuron::testing::Spawn({NEURON_SIM_BIN, "pod", "delete", "--kubelet-dir", dir_.str(),
                                   "--name", name, "--grace-period", grace},
                                  logs_ / (name + ".del.out"), logs_ / (name + ".del.err"));
  }
  // The numbers CMD printed after "up" on its first line: its PID, then any child's.
  std::vector<pid_t> UpLine(const std::string& name) {
    std::vector<pid_t> pids;
    EXPECT_TRUE(WaitUntil(
        [&] {
          std::istringstream in(neuron::testing::ReadFile(logs_ / (name + ".out")));
          std::string word;
          if (!(in >> word) || word != "up") return false;
          for (pid_t p; in >> p;) pids.push_back(p);
          return !pids.empty();
        },
        30s))
        << neuron::testing::ReadFile(logs_ / (name + ".err"));
    return pids;
  }
  static bool Alive(pid_t pid) { return kill(pid, 0) == 0; }

  fs::path logs_ = dir_.path() / "logs";
  TempDir node_{"node"};
  neuron::testing::SimNode sim_{{.sim_bin = NEURON_SIM_BIN,
                                 .root = node_.path(),
                                 .logs = logs_,
                                 .on_stop = neuron::testing::ExpectCleanExit}};
  std::unique_ptr<KubeletEmulator> k_;
  std::unique_ptr<TestPlugin> plugin_;
};

TEST_F(PodStopTest, CommandIgnoringSigtermIsKilledAfterTheGracePeriodAndHoldsItsDevicesTillGone) {
  // `trap "" TERM` is inherited by the sleeps: the whole group ignores SIGTERM.
  const pid_t run =
      PodRun("stubborn", "3", "trap '' TERM; echo up $$; while :; do sleep 0.1; done");
  const std::vector<pid_t> up = UpLine("stubborn");
  ASSERT_EQ(up.size(), 1u);
  ASSERT_EQ(InUse(*k_), 1);
  const auto start = std::chrono::steady_clock::now();
  const pid_t del = PodDelete("stubborn", "2");
  // Until the delete returns: devices read as free imply the process is gone. In use is read
  // first, so that a process dying between the two reads cannot fake a violation.
  std::optional<int> del_code;
  int samples_alive = 0;
  while (!(del_code = neuron::testing::WaitExit(del, 50ms)) &&
         std::chrono::steady_clock::now() - start < 60s) {
    const int in_use = InUse(*k_);
    const bool alive = Alive(up[0]);
    EXPECT_FALSE(in_use == 0 && alive) << "devices freed while the command runs";
    if (alive) ++samples_alive;
  }
  EXPECT_EQ(del_code, 0) << neuron::testing::ReadFile(logs_ / "stubborn.del.err");
  // SIGKILL came after the 2 s grace period, not before: the command lived through it.
  EXPECT_GE(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_GT(samples_alive, 0);
  EXPECT_EQ(neuron::testing::WaitExit(run, 30s), 137)
      << neuron::testing::ReadFile(logs_ / "stubborn.err");
  EXPECT_FALSE(Alive(up[0]));
  EXPECT_EQ(InUse(*k_), 0);
  EXPECT_TRUE(k_->Pods().empty());
}

TEST_F(PodStopTest, DeleteStopsACommandThatHonoursSigtermAtOnceWithItsChildren) {
  // The grace period is far beyond the ceilings below: only SIGTERM can end this in time.
  const pid_t run = PodRun("polite", "600", "sleep 1000 & echo up $$ $!; wait");
  const std::vector<pid_t> up = UpLine("polite");
  ASSERT_EQ(up.size(), 2u);
  ASSERT_TRUE(Alive(up[1]));
  EXPECT_EQ(neuron::testing::WaitExit(PodDelete("polite", "600"), 60s), 0)
      << neuron::testing::ReadFile(logs_ / "polite.del.err");
  // The delete returned, so the group is gone: the shell and its child, and the devices free.
  EXPECT_FALSE(Alive(up[0]));
  EXPECT_FALSE(Alive(up[1]));
  EXPECT_EQ(InUse(*k_), 0);
  EXPECT_EQ(neuron::testing::WaitExit(run, 30s), 143)
      << neuron::testing::ReadFile(logs_ / "polite.err");
}

TEST_F(PodStopTest, SigtermToPodRunStopsTheGroupAndFreesThePod) {
  const pid_t run = PodRun("signalled", "600", "sleep 1000 & echo up $$ $!; wait");
  const std::vector<pid_t> up = UpLine("signalled");
  ASSERT_EQ(up.size(), 2u);
  ASSERT_EQ(InUse(*k_), 1);
  kill(run, SIGTERM);
  EXPECT_EQ(neuron::testing::WaitExit(run, 60s), 143)
      << neuron::testing::ReadFile(logs_ / "signalled.err");
  // pod run returns after its delete, which returns once the group is gone.
  EXPECT_FALSE(Alive(up[1]));
  EXPECT_EQ(InUse(*k_), 0);
  EXPECT_TRUE(k_->Pods().empty());
}

}  // namespace
}  // namespace neuron::sim
