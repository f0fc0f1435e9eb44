// The device plugin against the kubelet emulator on simulated nodes: what registers, what pods
// get, that whole-device and core pods never share a core, that bad requests get clear errors,
// and that `neuron-sim pod run` runs a command on exactly the cores the plugin chose.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <optional>
#include <set>

#include "core/model/allocator.h"
#include "core/model/catalog.h"
#include "core/model/topology.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "tests/e2e/agent_node.h"
#include "tests/support/process.h"

namespace neuron::e2e {
namespace {

using neuron::testing::ReadFile;
using neuron::testing::Spawn;
using neuron::testing::WaitExit;

sim::PodSpec Pod(const std::string& name, std::map<std::string, int> requests) {
  return {.name = name, .containers = {{.requests = std::move(requests)}}};
}

Topology CatalogTopology(const std::string& instance) {
  const InstanceSpec* spec = *FindInstance(instance);
  std::vector<std::vector<int>> neighbours;
  neighbours.reserve(spec->devices);
  for (int d = 0; d < spec->devices; ++d) neighbours.push_back(ConnectedDevices(*spec, d));
  return Topology(neighbours);
}

// Cores of whole devices as global logical core ids.
std::set<int> CoresOf(const std::vector<int>& devices, int cores_per_device) {
  std::set<int> cores;
  for (int d : devices) {
    for (int k = 0; k < cores_per_device; ++k) cores.insert(d * cores_per_device + k);
  }
  return cores;
}

class RegistrationTest : public ::testing::TestWithParam<std::vector<std::string>> {};

// trn1.32xlarge's literal counts (the issue), trn2.48xlarge at LNC 2 and inf2.48xlarge from the
// catalog; every ID healthy, NUMA topology on each.
TEST_P(RegistrationTest, EveryResourceRegistersWithTheNodesCounts) {
  const std::vector<std::string> param = GetParam();
  AgentNode node({.instance = param[0], .sim_args = {param.begin() + 1, param.end()}});
  if (param[0] == "trn1.32xlarge") {
    EXPECT_EQ(node.devices(), 16);
    EXPECT_EQ(node.cores(), 32);
    EXPECT_EQ(node.efas(), 8);
  }
  for (const auto& [resource, count] :
       {std::pair{kNeuron, node.devices()}, {kCore, node.cores()}, {kEfa, node.efas()}}) {
    std::optional<sim::ResourceState> r = node.kubelet().Resource(resource);
    if (count == 0) {
      EXPECT_TRUE(!r || r->capacity == 0) << resource;
      continue;
    }
    ASSERT_TRUE(r) << resource;
    EXPECT_EQ(r->capacity, count) << resource;
    EXPECT_EQ(r->allocatable, count) << resource;
    EXPECT_TRUE(r->get_preferred_allocation) << resource;
    for (const auto& [id, numa] : r->numa) EXPECT_EQ(numa.size(), 1u) << resource << " " << id;
  }
  // The legacy name is off by default.
  EXPECT_FALSE(node.kubelet().Resource("aws.amazon.com/neurondevice").has_value());
}

INSTANTIATE_TEST_SUITE_P(Instances, RegistrationTest,
                         ::testing::Values(std::vector<std::string>{"trn1.32xlarge"},
                                           std::vector<std::string>{"trn2.48xlarge", "--lnc", "2"},
                                           std::vector<std::string>{"inf2.48xlarge"}));

// The blueprint's pod: 16 devices and 8 EFA interfaces on a trn1.32xlarge.
TEST(AllocationTest, TheLlamaPodGetsEveryDeviceCoreAndEfa) {
  AgentNode node({});
  absl::StatusOr<sim::AdmittedPod> pod =
      node.kubelet().AdmitPod(Pod("llama-0", {{kNeuron, 16}, {kEfa, 8}}));
  ASSERT_TRUE(pod.ok()) << pod.status() << "\n" << node.PluginLog();
  const sim::ContainerAllocation& c = pod->containers.at(0);
  EXPECT_EQ(c.envs.at("NEURON_RT_VISIBLE_CORES"), "0-31");
  EXPECT_EQ(c.envs.at("NEURON_ROOT"), node.root().string());
  std::set<std::string> paths;
  for (const sim::DeviceSpecOut& d : c.devices) {
    EXPECT_EQ(d.host_path, d.container_path);
    EXPECT_EQ(d.permissions, "rw");
    paths.insert(d.host_path);
  }
  for (int d = 0; d < 16; ++d) EXPECT_TRUE(paths.count("/dev/neuron" + std::to_string(d))) << d;
  for (int u = 0; u < 8; ++u) {
    EXPECT_TRUE(paths.count("/dev/infiniband/uverbs" + std::to_string(u))) << u;
  }
  EXPECT_EQ(paths.size(), 24u);
  // Everything is in use now.
  EXPECT_TRUE(node.WaitForResource(kNeuron, [](auto& r) { return r.in_use == 16; }));
  EXPECT_FALSE(node.kubelet().AdmitPod(Pod("one-more", {{kNeuron, 1}})).ok());
}

// Every request size on an empty node gets a contiguous set, connected where the torus allows.
TEST(AllocationTest, EveryRequestSizeOnAnEmptyNodeIsContiguousAndConnected) {
  AgentNode node({});
  const Topology topology = CatalogTopology("trn1.32xlarge");
  const Allocator allocator(topology, 2);
  for (int size : {1, 2, 4, 8, 16}) {
    absl::StatusOr<sim::AdmittedPod> pod =
        node.kubelet().AdmitPod(Pod("d" + std::to_string(size), {{kNeuron, size}}));
    ASSERT_TRUE(pod.ok()) << pod.status();
    const std::vector<int> devices = Ids(*pod, kNeuron);
    ASSERT_EQ(static_cast<int>(devices.size()), size);
    EXPECT_TRUE(Allocator::IsContiguous(devices)) << size;
    EXPECT_TRUE(topology.IsConnected(devices)) << size;
    ASSERT_TRUE(node.kubelet().DeletePod("default", pod->name).ok());
  }
  for (int size = 1; size <= 32; ++size) {
    // The plugin learns of the last release through PodResources: wait until cores are free.
    ASSERT_TRUE(node.WaitForResource(kCore, [](auto& r) { return r.allocatable == 32; })) << size;
    absl::StatusOr<sim::AdmittedPod> pod =
        node.kubelet().AdmitPod(Pod("c" + std::to_string(size), {{kCore, size}}));
    ASSERT_TRUE(pod.ok()) << pod.status();
    const std::vector<int> cores = Ids(*pod, kCore);
    ASSERT_EQ(static_cast<int>(cores.size()), size);
    EXPECT_TRUE(Allocator::IsContiguous(cores)) << size;
    EXPECT_EQ(cores.back() / 2 - cores.front() / 2 + 1, (size + 1) / 2)
        << "cores spread over more devices than needed for " << size;
    EXPECT_EQ(pod->containers.at(0).envs.at("NEURON_RT_VISIBLE_CORES"),
              size == 1 ? std::to_string(cores[0])
                        : std::to_string(cores.front()) + "-" + std::to_string(cores.back()));
    ASSERT_TRUE(node.kubelet().DeletePod("default", pod->name).ok());
  }
}

// The mask of docs/architecture.md#health: cores inside a whole-device allocation are not offered
// as neuroncore, and a device with a core handed out is not offered whole, until PodResources shows
// the release.
TEST(AllocationTest, WholeDevicePodsAndCorePodsNeverShareACore) {
  AgentNode node({});
  std::set<int> core_pod_cores, device_pod_cores;
  auto core_pod = node.kubelet().AdmitPod(Pod("cores-a", {{kCore, 3}}));
  ASSERT_TRUE(core_pod.ok()) << core_pod.status();
  for (int c : Ids(*core_pod, kCore)) core_pod_cores.insert(c);
  // Two devices are partly used now: 14 whole devices left.
  ASSERT_TRUE(node.WaitForResource(kNeuron, [](auto& r) { return r.allocatable == 14; }))
      << node.PluginLog();
  EXPECT_FALSE(node.kubelet().AdmitPod(Pod("too-big", {{kNeuron, 15}})).ok());

  auto device_pod = node.kubelet().AdmitPod(Pod("devices-a", {{kNeuron, 8}}));
  ASSERT_TRUE(device_pod.ok()) << device_pod.status();
  device_pod_cores = CoresOf(Ids(*device_pod, kNeuron), 2);
  // The kubelet's allocatable counts healthy IDs, in use or not: the 16 cores of the device
  // pod are masked, the core pod's own cores are not.
  ASSERT_TRUE(node.WaitForResource(kCore, [](auto& r) { return r.allocatable == 16; }))
      << node.PluginLog();
  // Fill the rest with core pods one core at a time; none may land on a device pod's core.
  for (int i = 0;; ++i) {
    auto more = node.kubelet().AdmitPod(Pod("cores-" + std::to_string(i), {{kCore, 1}}));
    if (!more.ok()) break;
    for (int c : Ids(*more, kCore)) {
      EXPECT_FALSE(device_pod_cores.count(c)) << "core " << c << " double-booked";
      EXPECT_TRUE(core_pod_cores.insert(c).second) << "core " << c << " handed out twice";
    }
  }
  EXPECT_EQ(core_pod_cores.size() + device_pod_cores.size(), 32u);

  // Releasing the device pod frees its cores for core pods, once PodResources shows it.
  ASSERT_TRUE(node.kubelet().DeletePod("default", "devices-a").ok());
  ASSERT_TRUE(node.WaitForResource(kCore, [](auto& r) { return r.allocatable == 32; }))
      << node.PluginLog();
}

// Bad requests straight to the plugin's socket, as a broken or racing kubelet could send them.
// GetPreferredAllocation: garbage in, a best effort out, never an error.
void ExpectPreferencesAreABestEffort(v1beta1::DevicePlugin::Stub& stub) {
  std::vector<std::string> seventeen;
  for (int i = 0; i <= 16; ++i) seventeen.push_back(std::to_string(i));
  v1beta1::PreferredAllocationRequest request;
  auto* a = request.add_container_requests();
  for (const char* id :
       {"99", "x", "2", "3", "2", "7", "8", "9", "-1", "007", "", "99999999999999"}) {
    a->add_available_deviceids(id);
  }
  a->add_must_include_deviceids("zz");  // not offered: a best effort leaves it out
  a->add_must_include_deviceids("7");
  a->set_allocation_size(3);
  auto* b = request.add_container_requests();  // nothing to choose from
  b->set_allocation_size(4);
  auto* huge = request.add_container_requests();
  for (const std::string& id : seventeen) huge->add_available_deviceids(id);
  huge->set_allocation_size(1 << 30);
  auto* more = request.add_container_requests();  // asks for more than is offered
  more->add_available_deviceids("0");
  more->set_allocation_size(40);
  v1beta1::PreferredAllocationResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 10s);
  grpc::Status s = stub.GetPreferredAllocation(&context, request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(response.container_responses_size(), 4);
  std::vector<std::string> first(response.container_responses(0).deviceids().begin(),
                                 response.container_responses(0).deviceids().end());
  EXPECT_EQ(first.size(), 3u);
  EXPECT_NE(std::find(first.begin(), first.end(), "7"), first.end());
  for (const std::string& id : first) {
    EXPECT_TRUE(id == "7" || id == "8" || id == "9" || id == "2" || id == "3") << id;
  }
  EXPECT_EQ(response.container_responses(3).deviceids_size(), 1) << "best effort: what exists";
}

TEST(AllocationTest, BadRequestsGetClearErrorsAndPreferencesNeverFail) {
  AgentNode node({});
  const std::string endpoint = node.kubelet().Resource(kNeuron)->endpoint;
  auto channel =
      grpc::CreateChannel("unix:" + (node.kubelet_dir() / "device-plugins" / endpoint).string(),
                          grpc::InsecureChannelCredentials());
  auto stub = v1beta1::DevicePlugin::NewStub(channel);

  auto allocate = [&](const std::vector<std::string>& ids) {
    v1beta1::AllocateRequest request;
    for (const std::string& id : ids) request.add_container_requests()->add_devices_ids(id);
    if (ids.empty()) request.add_container_requests();
    v1beta1::AllocateResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 10s);
    return stub->Allocate(&context, request, &response);
  };
  auto allocate_one = [&](const std::vector<std::string>& ids) {
    v1beta1::AllocateRequest request;
    auto* c = request.add_container_requests();
    for (const std::string& id : ids) c->add_devices_ids(id);
    v1beta1::AllocateResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 10s);
    return stub->Allocate(&context, request, &response);
  };
  struct Case {
    std::vector<std::string> ids;
    std::vector<std::string> named;  // what the message must say, each of them
  };
  std::vector<std::string> oversized;
  oversized.reserve(1000);
  for (int i = 0; i < 1000; ++i) oversized.push_back(std::to_string(i % 16));
  std::vector<std::string> seventeen;
  for (int i = 0; i <= 16; ++i) seventeen.push_back(std::to_string(i));
  for (const Case& c :
       {Case{{"99"}, {"unknown IDs \"99\""}}, Case{{"0", "99", "x"}, {"unknown IDs \"99\", \"x\""}},
        Case{{"3", "3"}, {"duplicate IDs \"3\""}}, Case{{"abc", "1"}, {"\"abc\""}},
        Case{{"-1"}, {"\"-1\""}}, Case{seventeen, {"asks for 17 IDs, the node has 16"}},
        Case{oversized, {"asks for 1000 IDs, the node has 16", "duplicate IDs"}},
        Case{{}, {"no device IDs"}}}) {
    grpc::Status s = allocate_one(c.ids);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << "ids " << c.ids.size() << ": " << s.error_message();
    for (const std::string& n : c.named) {
      EXPECT_NE(s.error_message().find(n), std::string::npos) << n << " in " << s.error_message();
    }
  }
  // A refused request changes nothing: no core of the devices it named is masked.
  ASSERT_TRUE(node.WaitForResource(kCore, [](auto& r) { return r.devices.size() == 32; }));
  const std::optional<sim::ResourceState> cores = node.kubelet().Resource(kCore);
  for (const auto& [id, healthy] : cores->devices) {
    EXPECT_TRUE(healthy) << "core " << id << " masked by a refused request";
  }
  EXPECT_TRUE(allocate({"0", "1"}).ok());  // two containers, one device each

  // An unplugged device is refused by name.
  node.Ctl({"unplug", "--device", "5"});
  ASSERT_TRUE(node.WaitForResource(kNeuron, [](auto& r) { return !r.devices.at("5"); }));
  grpc::Status unhealthy = allocate_one({"4", "5"});
  EXPECT_EQ(unhealthy.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(unhealthy.error_message().find("unhealthy IDs \"5\""), std::string::npos)
      << unhealthy.error_message();

  ExpectPreferencesAreABestEffort(*stub);
}

// `neuron-sim pod run -- CMD` execs CMD with the plugin's environment: a real workload runs on
// exactly the cores the plugin chose, and the pod is gone afterwards.
TEST(AllocationTest, PodRunExecsTheWorkloadOnTheAllocatedCores) {
  AgentNode node({});
  ASSERT_TRUE(node.kubelet().AdmitPod(Pod("first", {{kCore, 5}})).ok());
  const fs::path out = node.root() / ".." / "pod.out";
  const pid_t pid =
      Spawn({NEURON_SIM_BIN, "pod", "run", "--kubelet-dir", node.kubelet_dir().string(), "--name",
             "matmul", "--request", kCore + "=4", "--", "sh", "-c",
             "echo cores=$NEURON_RT_VISIBLE_CORES root=$NEURON_ROOT && exec " +
                 std::string(NEURON_SIM_BIN) + " run --workload matmul --steps 2"},
            out, node.root() / ".." / "pod.err");
  ASSERT_EQ(WaitExit(pid, 120s), 0) << ReadFile(node.root() / ".." / "pod.err") << ReadFile(out);
  const std::string text = ReadFile(out);
  // first holds 0-4 (cores 0-4 packed from device 0); the next contiguous four start at 5 or
  // on a fresh device: either way a range of four.
  EXPECT_NE(text.find("root=" + node.root().string()), std::string::npos) << text;
  const size_t at = text.find("cores=");
  ASSERT_NE(at, std::string::npos) << text;
  const std::string cores = text.substr(at + 6, text.find(' ', at) - at - 6);
  EXPECT_EQ(cores.find(','), std::string::npos) << cores;
  EXPECT_NE(cores.find('-'), std::string::npos) << cores;
  for (const sim::AdmittedPod& p : node.kubelet().Pods()) EXPECT_NE(p.name, "matmul");
}

}  // namespace
}  // namespace neuron::e2e
