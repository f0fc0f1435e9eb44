// The plugin library against a simulated node (`neuron-sim up`) and the kubelet emulator
// (driver-sim/kubelet, in this process), over real gRPC on Unix sockets: registration, lists,
// Allocate contents, the mask, what the library shows of health (the reason, the evidence) and
// kubelet restarts.

#include "plugin/plugin.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/driver/sysfs_names.h"
#include "driver-sim/kubelet/kubelet_emulator.h"
#include "plugin/node_watcher.h"
#include "tests/plugin/plugin_client.h"
#include "tests/support/process.h"
#include "tests/support/sim_node.h"
#include "tests/support/sim_testing.h"
#include "tests/support/temp_dir.h"

namespace neuron::plugin {
namespace {

using ::neuron::plugin::testing::Allocate;
using ::neuron::plugin::testing::kCeiling;
using ::neuron::plugin::testing::PluginStub;
using namespace std::chrono_literals;
namespace fs = std::filesystem;
using ::neuron::sim::KubeletEmulator;
using ::neuron::sim::ResourceState;
using ::neuron::testing::SimNode;
using ::neuron::testing::TempDir;

const std::string kNeuron(kResourceNeuron);
const std::string kCore(kResourceNeuronCore);
const std::string kEfa(kResourceEfa);

// One ID as a ListAndWatch message listed it.
struct Listed {
  std::string health;
  std::vector<int64_t> numa;
};

class PluginTest : public ::testing::Test {
 protected:
  fs::path root() const { return tmp_.path() / "root"; }
  fs::path kdir() const { return tmp_.path() / "k"; }

  void StartSim(const std::string& instance, const std::vector<std::string>& extra = {}) {
    sim_ = std::make_unique<SimNode>(
        ::neuron::testing::SimNodeOptions{.sim_bin = NEURON_SIM_BIN,
                                          .root = root(),
                                          .logs = tmp_.path(),
                                          .on_stop = ::neuron::testing::ExpectCleanExit});
    ASSERT_TRUE(sim_->Up(instance, extra)) << sim_->Log();
  }

  void StartPlugin(const std::function<void(Config&)>& tweak = {}) {
    absl::StatusOr<std::unique_ptr<KubeletEmulator>> kubelet = KubeletEmulator::Start(
        {.kubelet_dir = kdir().string(), .root = root().string(), .rpc_deadline = kCeiling});
    ASSERT_TRUE(kubelet.ok()) << kubelet.status();
    kubelet_ = *std::move(kubelet);
    Config c;
    c.root = root().string();
    c.kubelet_dir = kdir().string();
    c.discovery = DiscoveryMode::kDirectory;
    c.podresources_period = 100ms;
    c.allocation_grace = 1000ms;
    c.health.poll_period = 100ms;
    if (tweak) tweak(c);
    plugin_ = std::make_unique<Plugin>(c);
    ASSERT_TRUE(plugin_->Start().ok());
  }

  void Boot(const std::string& instance, const std::vector<std::string>& extra = {},
            const std::function<void(Config&)>& tweak = {}) {
    StartSim(instance, extra);
    StartPlugin(tweak);
    for (const std::string& r : {kNeuron, kCore, kEfa}) {
      ASSERT_TRUE(WaitRegistered(r)) << r << " never registered";
    }
  }

  // The kubelet has `resource` registered, its ListAndWatch stream open.
  bool WaitRegistered(const std::string& resource, std::chrono::milliseconds ceiling = kCeiling) {
    return ::neuron::testing::WaitUntil(
        [&] {
          const std::optional<ResourceState> r = kubelet_->Resource(resource);
          return r && r->connected;
        },
        ceiling);
  }

  fs::path Socket(const std::string& resource) {
    const std::optional<ResourceState> r = kubelet_->Resource(resource);
    return r ? kdir() / "device-plugins" / r->endpoint : fs::path();
  }

  // What the plugin's ListAndWatch stream last told the kubelet about `resource`.
  std::map<std::string, Listed> List(const std::string& resource) {
    std::map<std::string, Listed> out;
    const std::optional<ResourceState> r = kubelet_->Resource(resource);
    if (!r) return out;
    for (const auto& [id, healthy] : r->devices) {
      const auto numa = r->numa.find(id);
      out[id] = {healthy ? "Healthy" : "Unhealthy",
                 numa == r->numa.end() ? std::vector<int64_t>{} : numa->second};
    }
    return out;
  }
  // Waits until a list of `resource` has arrived and satisfies `pred`.
  bool WaitList(const std::string& resource,
                const std::function<bool(const std::map<std::string, Listed>&)>& pred,
                std::chrono::milliseconds ceiling = kCeiling) {
    return ::neuron::testing::WaitUntil(
        [&] {
          const std::optional<ResourceState> r = kubelet_->Resource(resource);
          return r && r->updates > 0 && pred(List(resource));
        },
        ceiling);
  }
  bool WaitHealth(const std::string& resource, const std::string& id, const std::string& health) {
    return WaitList(resource,
                    [&](const auto& l) { return l.count(id) && l.at(id).health == health; });
  }

  void Ctl(const std::vector<std::string>& words) {
    const ::neuron::testing::RunResult r = sim_->Ctl(words, kCeiling);
    ASSERT_EQ(r.code, 0) << r.err;
  }

  std::unique_ptr<v1beta1::DevicePlugin::Stub> Stub(const std::string& resource) {
    return PluginStub(Socket(resource));
  }

  std::string FirstEfa() {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(root() / "sys/class/infiniband")) {
      names.insert(e.path().filename().string());
    }
    return names.empty() ? "" : *names.begin();
  }

  // Declaration order is teardown order in reverse: the plugin stops before the kubelet and
  // the simulated node.
  TempDir tmp_{"plg"};
  std::unique_ptr<SimNode> sim_;
  std::unique_ptr<KubeletEmulator> kubelet_;
  std::unique_ptr<Plugin> plugin_;
};

std::vector<std::string> Paths(const v1beta1::ContainerAllocateResponse& r) {
  std::vector<std::string> out;
  for (const auto& d : r.devices()) {
    EXPECT_EQ(d.host_path(), d.container_path());
    EXPECT_EQ(d.permissions(), "rw");
    out.push_back(d.host_path());
  }
  return out;
}

// "CONTAINER_PATH<-HOST_PATH" per device spec, in the answer's order.
std::vector<std::string> Mapped(const v1beta1::ContainerAllocateResponse& r) {
  std::vector<std::string> out;
  for (const auto& d : r.devices()) {
    EXPECT_EQ(d.permissions(), "rw");
    out.push_back(d.container_path() + "<-" + d.host_path());
  }
  return out;
}

std::vector<std::string> Cdi(const v1beta1::ContainerAllocateResponse& r) {
  std::vector<std::string> out;
  for (const auto& d : r.cdi_devices()) out.push_back(d.name());
  return out;
}

size_t CountHealth(const std::map<std::string, Listed>& l, const std::string& health) {
  return std::count_if(l.begin(), l.end(),
                       [&](const auto& e) { return e.second.health == health; });
}

TEST_F(PluginTest, RegistersEveryResourceWithCountsAndNumaOnTrn1) {
  Boot("trn1.32xlarge");
  // The instance id where a Nitro host keeps it and the plugin reads it
  // (docs/architecture.md#instance-identity).
  std::string instance_id =
      ::neuron::testing::ReadFile(RootPaths(root()).DmiDir() / "board_asset_tag");
  while (!instance_id.empty() && instance_id.back() == '\n') instance_id.pop_back();
  ASSERT_TRUE(instance_id.starts_with("i-")) << instance_id;
  // The emulator registers a plugin only when its version is v1beta1 and GetDevicePluginOptions
  // answered during Register, as the kubelet does (driver-sim/kubelet/registration.cc).
  EXPECT_EQ(kubelet_->registrations(), 3u);
  for (const ResourceState& r : kubelet_->Resources()) {
    EXPECT_TRUE(r.get_preferred_allocation) << r.name;
    EXPECT_FALSE(r.pre_start_required) << r.name;
    EXPECT_NE(r.name, std::string(kResourceNeuronDevice)) << "legacy resource is off";
    EXPECT_TRUE(r.endpoint.ends_with("-" + instance_id + ".sock")) << r.endpoint;
  }
  EXPECT_EQ(Socket(kNeuron).filename(), "neuron-" + instance_id + ".sock");
  const std::map<std::string, size_t> want{{kNeuron, 16}, {kCore, 32}, {kEfa, 8}};
  for (const auto& [resource, count] : want) {
    const size_t n = count;  // clang-tidy 14 (clang before 16) cannot capture a structured binding
    ASSERT_TRUE(WaitList(resource, [&](const auto& l) { return CountHealth(l, "Healthy") == n; }))
        << resource << " lists " << List(resource).size();
    for (const auto& [id, listed] : List(resource)) {
      EXPECT_EQ(listed.numa.size(), 1u) << resource << " " << id << " has no NUMA node";
    }
  }
  EXPECT_TRUE(::neuron::testing::WaitUntil([&] { return plugin_->Ready(); }, kCeiling));
}

TEST_F(PluginTest, AllocateContentsOnTrn1) {
  Boot("trn1.32xlarge", {}, [](Config& c) { c.cdi = true; });
  auto neuron = Stub(kNeuron);
  v1beta1::AllocateResponse r;
  ASSERT_TRUE(Allocate(neuron.get(), {{"3", "2"}, {"5"}}, &r).ok());
  ASSERT_EQ(r.container_responses_size(), 2);
  EXPECT_EQ(Paths(r.container_responses(0)),
            (std::vector<std::string>{"/dev/neuron2", "/dev/neuron3"}));
  EXPECT_EQ(r.container_responses(0).envs().at("NEURON_RT_VISIBLE_CORES"), "4-7");
  EXPECT_EQ(Cdi(r.container_responses(0)),
            (std::vector<std::string>{"aws.amazon.com/neuron=2", "aws.amazon.com/neuron=3"}));
  EXPECT_EQ(r.container_responses(1).envs().at("NEURON_RT_VISIBLE_CORES"), "10-11");

  auto core = Stub(kCore);
  r.Clear();
  ASSERT_TRUE(Allocate(core.get(), {{"16", "17", "18"}}, &r).ok());
  EXPECT_EQ(Paths(r.container_responses(0)),
            (std::vector<std::string>{"/dev/neuron8", "/dev/neuron9"}));
  EXPECT_EQ(r.container_responses(0).envs().at("NEURON_RT_VISIBLE_CORES"), "16-18");

  const std::string efa = FirstEfa();
  auto efa_stub = Stub(kEfa);
  r.Clear();
  ASSERT_TRUE(Allocate(efa_stub.get(), {{efa}}, &r).ok());
  ASSERT_EQ(r.container_responses(0).devices_size(), 1);
  EXPECT_TRUE(
      r.container_responses(0).devices(0).host_path().starts_with("/dev/infiniband/uverbs"));
  EXPECT_TRUE(fs::exists(root().string() + r.container_responses(0).devices(0).host_path()))
      << "the sim has no " << r.container_responses(0).devices(0).host_path();
  EXPECT_EQ(Cdi(r.container_responses(0)),
            (std::vector<std::string>{"vpc.amazonaws.com/efa=" + efa}));
  EXPECT_EQ(r.container_responses(0).envs_size(), 0);
}

TEST_F(PluginTest, AllocateContentsOnTrn2AtLnc2) {
  Boot("trn2.48xlarge", {"--lnc", "2"}, [](Config& c) { c.lnc = 2; });
  ASSERT_TRUE(WaitList(kCore, [](const auto& l) { return l.size() == 64; }))
      << "trn2.48xlarge at LNC 2: 16 devices x 4 logical cores, got " << List(kCore).size();
  auto neuron = Stub(kNeuron);
  v1beta1::AllocateResponse r;
  ASSERT_TRUE(Allocate(neuron.get(), {{"1"}}, &r).ok());
  EXPECT_EQ(Paths(r.container_responses(0)), std::vector<std::string>{"/dev/neuron1"});
  EXPECT_EQ(r.container_responses(0).envs().at("NEURON_RT_VISIBLE_CORES"), "4-7");
  EXPECT_EQ(r.container_responses(0).cdi_devices_size(), 0) << "CDI is off by default";
  auto core = Stub(kCore);
  r.Clear();
  ASSERT_TRUE(Allocate(core.get(), {{"10", "11"}}, &r).ok());
  EXPECT_EQ(Paths(r.container_responses(0)), std::vector<std::string>{"/dev/neuron2"});
  EXPECT_EQ(r.container_responses(0).envs().at("NEURON_RT_VISIBLE_CORES"), "10-11");
}

TEST_F(PluginTest, ContainerNumberingCountsFromZeroWhileHoldingsStayHostIds) {
  Boot("trn1.32xlarge", {}, [](Config& c) {
    c.device_numbering = DeviceNumbering::kContainer;
    c.cdi = true;
  });
  auto core = Stub(kCore);
  v1beta1::AllocateResponse r;
  // trn1: 2 cores per device, so host cores 10-11 are device 5's and 15-16 span devices 7 and 8.
  ASSERT_TRUE(Allocate(core.get(), {{"11", "10"}, {"13"}, {"16", "15"}}, &r).ok());
  ASSERT_EQ(r.container_responses_size(), 3);
  EXPECT_EQ(Mapped(r.container_responses(0)),
            std::vector<std::string>{"/dev/neuron0<-/dev/neuron5"});
  EXPECT_EQ(r.container_responses(0).envs().at("NEURON_RT_VISIBLE_CORES"), "0-1");
  // A partial device keeps each core's place within it: host core 13 is device 6's second.
  EXPECT_EQ(Mapped(r.container_responses(1)),
            std::vector<std::string>{"/dev/neuron0<-/dev/neuron6"});
  EXPECT_EQ(r.container_responses(1).envs().at("NEURON_RT_VISIBLE_CORES"), "1");
  EXPECT_EQ(Mapped(r.container_responses(2)),
            (std::vector<std::string>{"/dev/neuron0<-/dev/neuron7", "/dev/neuron1<-/dev/neuron8"}));
  EXPECT_EQ(r.container_responses(2).envs().at("NEURON_RT_VISIBLE_CORES"), "1-2");
  EXPECT_EQ(Cdi(r.container_responses(2)),
            (std::vector<std::string>{"aws.amazon.com/neuron=7", "aws.amazon.com/neuron=8"}))
      << "CDI names stay host IDs";

  auto neuron = Stub(kNeuron);
  r.Clear();
  ASSERT_TRUE(Allocate(neuron.get(), {{"10", "9"}}, &r).ok());
  EXPECT_EQ(
      Mapped(r.container_responses(0)),
      (std::vector<std::string>{"/dev/neuron0<-/dev/neuron9", "/dev/neuron1<-/dev/neuron10"}));
  EXPECT_EQ(r.container_responses(0).envs().at("NEURON_RT_VISIBLE_CORES"), "0-3");

  // The mask is keyed by host IDs: host devices 5-8 hold cores, host cores 18-21 are in
  // devices 9-10; container index 0 means nothing to it.
  for (const char* id : {"5", "6", "7", "8"}) {
    EXPECT_TRUE(WaitHealth(kNeuron, id, "Unhealthy")) << id;
  }
  for (const char* id : {"18", "19", "20", "21"}) {
    EXPECT_TRUE(WaitHealth(kCore, id, "Unhealthy")) << id;
  }
  EXPECT_EQ(List(kNeuron).at("0").health, "Healthy");
  EXPECT_EQ(List(kCore).at("0").health, "Healthy");
  const grpc::Status refused = Allocate(neuron.get(), {{"5"}}, &r);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(refused.error_message().find("\"5\""), std::string::npos) << refused.error_message();

  // EFA device nodes are never renumbered.
  auto efa = Stub(kEfa);
  r.Clear();
  ASSERT_TRUE(Allocate(efa.get(), {{FirstEfa()}}, &r).ok());
  ASSERT_EQ(r.container_responses(0).devices_size(), 1);
  const auto& spec = r.container_responses(0).devices(0);
  EXPECT_EQ(spec.container_path(), spec.host_path());
  EXPECT_TRUE(spec.host_path().starts_with("/dev/infiniband/uverbs")) << spec.host_path();
}

// Bad Allocate and GetPreferredAllocation requests are AllocationTest's
// (tests/e2e/plugin_allocation_test.cc), sent to the real binary's socket.

TEST_F(PluginTest, MaskKeepsWholeDevicesAndCoresApartUntilPodResourcesReleases) {
  StartSim("trn1.32xlarge");
  StartPlugin([](Config& c) { c.allocation_grace = 3000ms; });
  ASSERT_TRUE(WaitList(kNeuron, [](const auto& l) { return l.size() == 16; }));
  ASSERT_TRUE(WaitList(kCore, [](const auto& l) { return l.size() == 32; }));
  // A pod pinned to one ID, admitted as the kubelet admits it: GetPreferredAllocation, Allocate,
  // then the kubelet records the pod, which PodResources shows from then on.
  auto admit = [&](const std::string& name, const std::string& resource, const std::string& id) {
    sim::PodSpec pod{.name = name, .containers = {{.requests = {{resource, 1}}}}};
    pod.containers[0].pinned[resource] = {id};
    return kubelet_->AdmitPod(pod).status();
  };
  ASSERT_TRUE(admit("whole", kNeuron, "0").ok());
  EXPECT_TRUE(WaitHealth(kCore, "0", "Unhealthy"));
  EXPECT_TRUE(WaitHealth(kCore, "1", "Unhealthy"));
  EXPECT_EQ(List(kCore).at("2").health, "Healthy");
  ASSERT_TRUE(admit("cores", kCore, "5").ok());
  // Both Allocates were made before this point, so their grace has ended by then.
  const auto grace_end = std::chrono::steady_clock::now() + 3000ms;
  EXPECT_TRUE(WaitHealth(kNeuron, "2", "Unhealthy"));
  EXPECT_EQ(List(kNeuron).at("0").health, "Healthy") << "a holder is not masked in its own list";
  // Straight to the socket (the kubelet would not offer an ID listed Unhealthy): refused by name.
  auto core = Stub(kCore);
  v1beta1::AllocateResponse r;
  const grpc::Status s = Allocate(core.get(), {{"1"}}, &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("\"1\""), std::string::npos) << s.error_message();

  // The kubelet records both; past the grace period they stay masked, PodResources speaking for
  // them: no Allocate holding is left pending (plugin/node_state.h).
  ASSERT_TRUE(::neuron::testing::WaitUntil(
      [&] { return std::chrono::steady_clock::now() > grace_end; }, kCeiling));
  ASSERT_TRUE(::neuron::testing::WaitUntil(
      [&] { return plugin_->state().pending_allocations() == 0; }, kCeiling))
      << "the plugin never saw the pods in PodResources";
  const std::shared_ptr<const NodeView> view = plugin_->state().view();
  EXPECT_TRUE(view->Get(Resource::kNeuronCore).Find("0")->masked);
  EXPECT_TRUE(view->Get(Resource::kNeuron).Find("2")->masked);
  EXPECT_EQ(List(kCore).at("0").health, "Unhealthy");
  EXPECT_EQ(List(kNeuron).at("2").health, "Unhealthy");
  // The pods end: their IDs vanish from PodResources and the mask lifts.
  ASSERT_TRUE(kubelet_->DeletePod("default", "whole").ok());
  ASSERT_TRUE(kubelet_->DeletePod("default", "cores").ok());
  EXPECT_TRUE(WaitHealth(kCore, "0", "Healthy"));
  EXPECT_TRUE(WaitHealth(kNeuron, "2", "Healthy"));
}

// PodResources is asked every podresources_period while anything is held, and only as a safety
// net while nothing is: then nothing can be released, and the next holding comes by our own
// Allocate, which asks at once.
TEST_F(PluginTest, PodResourcesIsAskedWhileSomethingIsHeld) {
  StartSim("trn1.32xlarge");
  StartPlugin();  // podresources_period 100 ms
  ASSERT_TRUE(WaitList(kNeuron, [](const auto& l) { return l.size() == 16; }));
  ASSERT_TRUE(
      ::neuron::testing::WaitUntil([&] { return kubelet_->pod_resources_lists() > 0; }, kCeiling));
  const uint64_t idle = kubelet_->pod_resources_lists();
  std::this_thread::sleep_for(1s);  // ten periods
  EXPECT_LE(kubelet_->pod_resources_lists(), idle + 1) << "asked while nothing is held";

  sim::PodSpec pod{.name = "held", .containers = {{.requests = {{kNeuron, 1}}}}};
  ASSERT_TRUE(kubelet_->AdmitPod(pod).ok());
  const uint64_t held = kubelet_->pod_resources_lists();
  EXPECT_TRUE(::neuron::testing::WaitUntil(
      [&] { return kubelet_->pod_resources_lists() >= held + 5; }, kCeiling))
      << "not asked every period while a device is held";

  ASSERT_TRUE(kubelet_->DeletePod("default", "held").ok());
  ASSERT_TRUE(::neuron::testing::WaitUntil(
      [&] { return HeldDevices(*plugin_->state().view()).empty(); }, kCeiling))
      << "the release was never seen";
  const uint64_t released = kubelet_->pod_resources_lists();
  std::this_thread::sleep_for(1s);
  EXPECT_LE(kubelet_->pod_resources_lists(), released + 1) << "still asked after the release";
}

// Unplug, ECC, reset and EFA faults against the real binary are PluginHealthTest's
// (tests/e2e/plugin_lifecycle_test.cc); here what only the library shows: the reason a failed
// reset leaves, the device's INVALID state, and that every device is healthy again afterwards.
TEST_F(PluginTest, AFailedResetLeavesTheInvalidStateAsTheReasonUntilAResetRecovers) {
  Boot("trn1.32xlarge");
  ASSERT_TRUE(WaitList(kNeuron, [](const auto& l) { return CountHealth(l, "Healthy") == 16; }));
  Ctl({"reset", "--device", "4", "--fail"});
  EXPECT_TRUE(WaitHealth(kNeuron, "4", "Unhealthy"));
  ASSERT_TRUE(::neuron::testing::WaitUntil(
      [&] { return ::neuron::testing::ReadFile(sim_->Device(4) / "reset") == "2\n"; }, kCeiling))
      << "the failed reset ends in INVALID";
  // The watcher has seen INVALID (not only the reset in progress) once the view says so.
  EXPECT_TRUE(::neuron::testing::WaitUntil(
      [&] {
        const auto view = plugin_->state().view();
        const auto it = view->devices.find(4);
        return it != view->devices.end() && it->second.reason.find("INVALID") != std::string::npos;
      },
      kCeiling))
      << plugin_->state().view()->devices.at(4).reason;
  EXPECT_FALSE(plugin_->state().view()->devices.at(4).healthy);
  EXPECT_EQ(List(kNeuron).at("4").health, "Unhealthy") << "INVALID stays Unhealthy";
  Ctl({"reset", "--device", "4"});
  EXPECT_TRUE(WaitHealth(kNeuron, "4", "Healthy"));
  EXPECT_EQ(CountHealth(List(kNeuron), "Healthy"), 16u);
}

// The driver's health_status/ counts (driver 2.28+, Trn2) are evidence where the source defines
// them as uncorrected-error counts; hw_error_event, which counts register changes, is not
// (docs/metrics.md#health-metrics). Written directly, as the driver shows them when only the
// firmware's cached registers moved.
TEST_F(PluginTest, HealthStatusCountsAreEvidenceAndTheEventCountIsNot) {
  Boot("trn2.48xlarge");
  ASSERT_TRUE(WaitList(kNeuron, [](const auto& l) { return CountHealth(l, "Healthy") == 16; }));
  const fs::path hs = "stats/hardware/health_status";
  ::neuron::testing::WriteFile(sim_->Device(5) / hs / "hw_error_event", "7\n");
  ::neuron::testing::WriteFile(sim_->Device(4) / hs / "hbm_ecc_err_count", "1\n");
  EXPECT_TRUE(WaitHealth(kNeuron, "4", "Unhealthy"));
  EXPECT_EQ(plugin_->state().view()->devices.at(4).reason, "uncorrected ECC (hbm)");
  EXPECT_EQ(plugin_->state().view()->devices.at(4).health.components.Join(), "hbm");
  // A poll reads the devices in index order, so the one that saw device 4's count (written after
  // device 5's event count) read device 5's too.
  EXPECT_EQ(List(kNeuron).at("5").health, "Healthy");
  EXPECT_TRUE(plugin_->state().view()->devices.at(5).healthy);
}

TEST_F(PluginTest, ReRegistersAfterEveryKubeletRestart) {
  Boot("trn1.32xlarge");
  for (size_t round = 2; round <= 4; ++round) {
    const uint64_t before = kubelet_->registrations();
    // Deletes our sockets, re-creates kubelet.sock, capacity 0 until we register again.
    ASSERT_TRUE(kubelet_->Restart().ok());
    ASSERT_TRUE(::neuron::testing::WaitUntil(
        [&] { return kubelet_->registrations() >= before + 3; }, kCeiling))
        << "round " << round << ": not registered again";
    for (const std::string& r : {kNeuron, kCore, kEfa}) {
      EXPECT_TRUE(WaitRegistered(r) && fs::exists(Socket(r)))
          << r << " round " << round << ": not registered again with its socket re-created";
    }
    EXPECT_TRUE(WaitList(kNeuron, [](const auto& l) { return l.size() == 16; })) << "served again";
  }
  EXPECT_TRUE(::neuron::testing::WaitUntil([&] { return plugin_->Ready(); }, 10s));
}

TEST_F(PluginTest, IdlesWithoutDevicesAndPicksThemUpWhenTheyAppear) {
  fs::create_directories(root());
  StartPlugin();
  std::this_thread::sleep_for(1s);
  EXPECT_TRUE(plugin_->Ready()) << plugin_->ReadyDetail();
  EXPECT_EQ(kubelet_->registrations(), 0u) << "nothing to serve, nothing registered";
  StartSim("trn1.32xlarge");
  ASSERT_TRUE(WaitRegistered(kNeuron, 20s)) << plugin_->ReadyDetail();
  EXPECT_TRUE(WaitList(kNeuron, [](const auto& l) { return CountHealth(l, "Healthy") == 16; }));
}

// docs/architecture.md#instance-identity: the DMI asset tag names the plugin's sockets, which it
// removes at start. A tag that is not an instance id is not used, so it cannot steer that removal
// out of device-plugins/.
TEST_F(PluginTest, AnAssetTagThatIsNoInstanceIdNamesNoFile) {
  ::neuron::testing::WriteFile(RootPaths(root()).DmiDir() / "board_asset_tag", "x/../../victim\n");
  const fs::path plugin_dir = kdir() / "device-plugins";
  fs::create_directories(plugin_dir / "neuron-x");  // so that the kernel could resolve the path
  const fs::path victim = kdir() / "victim.sock";
  ::neuron::testing::WriteFile(victim, "not ours");
  StartPlugin();
  EXPECT_TRUE(fs::exists(victim)) << "removed through the asset tag";
}

// A poll period below 100 ms would spin the health thread; the watcher refuses it even when the
// config's check is bypassed (a Config built in code).
TEST(NodeWatcherTest, RefusesAPollPeriodThatWouldSpin) {
  TempDir tmp;
  NodeState state(std::chrono::seconds(1));
  for (const auto period : {0ms, -5ms, 99ms}) {
    NodeWatcher::Options options{
        .node = {.root = tmp.path(), .discovery = DiscoveryMode::kDirectory}, .health = {}};
    options.health.poll_period = period;
    NodeWatcher watcher(options, &state);
    const absl::Status s = watcher.Start();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << period.count() << "ms: " << s;
    EXPECT_NE(s.message().find("health.poll_period"), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace neuron::plugin
