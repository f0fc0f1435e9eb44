// PodResources' DynamicResource entries as pod attribution (docs/metrics.md#dra-attribution):
// golden List answers, in the kubelet's wire form, turned into assignments; device names of our
// DRA driver and of AWS's mapped to device-plugin resources and IDs, others kept as reported; and
// the PodResources locator finding a DRA pod by device index over a real gRPC server.
#include <google/protobuf/text_format.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "podresources/v1/api.grpc.pb.h"
#include "proto/pod_resources.h"
#include "proto/pod_resources_locator.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

using namespace std::chrono_literals;

v1::ListPodResourcesResponse Parse(const std::string& text) {
  v1::ListPodResourcesResponse r;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &r)) << text;
  return r;
}

// A node running our driver: one pod, a device-plugin grant beside two claims (4 devices and an
// EFA; one core), as the kubelet lists them (pkg/kubelet/apis/podresources, one ClaimResource per
// device of the claim's allocation).
constexpr char kOurDriver[] = R"pb(
  pod_resources {
    name: "llama-0"
    namespace: "training"
    containers {
      name: "main"
      devices { resource_name: "vpc.amazonaws.com/efa" device_ids: "rdmap16s27" }
      dynamic_resources {
        claim_name: "llama-0-neurons-x7k2p"
        claim_namespace: "training"
        claim_resources {
          cdi_devices { name: "aws.amazon.com/neuron=0f6c-neuron-3" }
          driver_name: "neuron.aws.com"
          pool_name: "ip-10-0-0-1"
          device_name: "neuron-3"
        }
        claim_resources {
          driver_name: "neuron.aws.com"
          pool_name: "ip-10-0-0-1"
          device_name: "efa-rdmap32s27"
        }
      }
      dynamic_resources {
        claim_name: "core"
        claim_namespace: "training"
        claim_resources {
          driver_name: "neuron.aws.com"
          pool_name: "ip-10-0-0-1"
          device_name: "neuroncore-24"
        }
      }
    }
  }
)pb";

TEST(PodResourcesDraTest, OurDeviceNamesBecomeDevicePluginIds) {
  const PodAssignments got = AssignmentsFromList(Parse(kOurDriver));
  const DraClaimDevice neurons{"training",       "llama-0-neurons-x7k2p",
                               "neuron.aws.com", "ip-10-0-0-1",
                               "neuron-3",       {"aws.amazon.com/neuron=0f6c-neuron-3"}};
  DraClaimDevice efa = neurons;
  efa.device = "efa-rdmap32s27";
  efa.cdi_devices.clear();
  const DraClaimDevice core{"training",    "core",          "neuron.aws.com",
                            "ip-10-0-0-1", "neuroncore-24", {}};
  const std::vector<PodDeviceAssignment> want = {
      {"training", "llama-0", "main", "vpc.amazonaws.com/efa", {"rdmap16s27"}, std::nullopt},
      {"training", "llama-0", "main", "aws.amazon.com/neuron", {"3"}, neurons},
      {"training", "llama-0", "main", "vpc.amazonaws.com/efa", {"rdmap32s27"}, efa},
      {"training", "llama-0", "main", "aws.amazon.com/neuroncore", {"24"}, core},
  };
  EXPECT_EQ(got.all(), want);
  ASSERT_NE(got.Holder("aws.amazon.com/neuron", "3"), nullptr);
  EXPECT_EQ(got.Holder("aws.amazon.com/neuron", "3")->claim->claim_name, "llama-0-neurons-x7k2p");
  EXPECT_EQ(got.Holder("aws.amazon.com/neuroncore", "24")->claim->device, "neuroncore-24");
  EXPECT_EQ(got.Holder("vpc.amazonaws.com/efa", "rdmap16s27")->claim, std::nullopt);
}

// A node running AWS's driver: its devices are `neurondevice<N>` (SDK deploy/eks/dra.rst, Example
// 1's allocation); an UltraServer `neuron_node` device, whose name we have not seen published,
// and another vendor's device stay as reported, under their driver's name.
TEST(PodResourcesDraTest, AwsNamesAreMappedAndOthersKeptAsReported) {
  const PodAssignments got = AssignmentsFromList(Parse(R"pb(
    pod_resources {
      name: "pod0"
      namespace: "default"
      containers {
        name: "ctr0"
        dynamic_resources {
          claim_name: "pod0-neurons-zdk76"
          claim_namespace: "default"
          claim_resources {
            driver_name: "neuron.aws.com"
            pool_name: "ip-1-1-1-1"
            device_name: "neurondevice2"
          }
          claim_resources {
            driver_name: "neuron.aws.com"
            pool_name: "ip-1-1-1-1"
            device_name: "neurondevice15"
          }
          claim_resources {
            driver_name: "neuron.aws.com"
            pool_name: "ip-1-1-1-1"
            device_name: "ultraserver-node"
          }
          claim_resources {
            driver_name: "gpu.nvidia.com"
            pool_name: "ip-1-1-1-1"
            device_name: "gpu-0"
          }
        }
      }
    }
  )pb"));
  ASSERT_EQ(got.all().size(), 4u);
  EXPECT_EQ(got.all()[0].resource, "aws.amazon.com/neuron");
  EXPECT_EQ(got.all()[0].ids, std::vector<std::string>{"2"});
  EXPECT_EQ(got.all()[1].ids, std::vector<std::string>{"15"});
  EXPECT_EQ(got.all()[2].resource, "neuron.aws.com");
  EXPECT_EQ(got.all()[2].ids, std::vector<std::string>{"ultraserver-node"});
  EXPECT_EQ(got.all()[3].resource, "gpu.nvidia.com");
  EXPECT_EQ(got.all()[3].ids, std::vector<std::string>{"gpu-0"});
  for (const PodDeviceAssignment& a : got.all()) {
    ASSERT_TRUE(a.claim.has_value());
    EXPECT_EQ(a.claim->claim_name, "pod0-neurons-zdk76");
    EXPECT_EQ(a.claim->pool, "ip-1-1-1-1");
  }
}

// Names are outside input: only the exact forms place a device; anything else is reported as is.
TEST(PodResourcesDraTest, MapDraDeviceTakesOnlyExactForms) {
  const std::string drv(kDraDriverNeuron);
  EXPECT_EQ(MapDraDevice(drv, "neuron-0"), (PlacedDraDevice{"aws.amazon.com/neuron", "0"}));
  EXPECT_EQ(MapDraDevice(drv, "neuron-63"), (PlacedDraDevice{"aws.amazon.com/neuron", "63"}));
  EXPECT_EQ(MapDraDevice(drv, "neurondevice7"), (PlacedDraDevice{"aws.amazon.com/neuron", "7"}));
  EXPECT_EQ(MapDraDevice(drv, "neuroncore-511"),
            (PlacedDraDevice{"aws.amazon.com/neuroncore", "511"}));
  EXPECT_EQ(MapDraDevice(drv, "efa-rdmap16s27"),
            (PlacedDraDevice{"vpc.amazonaws.com/efa", "rdmap16s27"}));
  for (const char* bad :
       {"neuron-64", "neuron-01", "neuron--1", "neuron-", "neuron-1a", "neuroncore-512",
        "neurondevice", "neurondevice-1", "efa-", "efa-a.b", "Neuron-1", "neuron-4294967296", ""}) {
    EXPECT_EQ(MapDraDevice(drv, bad), std::nullopt) << bad;
  }
  EXPECT_EQ(MapDraDevice("other.example.com", "neuron-1"), std::nullopt);
  // The EFAs' own driver: its EFAs, and nothing else.
  const std::string efa(kDraDriverEfa);
  EXPECT_EQ(MapDraDevice(efa, "efa-rdmap16s27"),
            (PlacedDraDevice{"vpc.amazonaws.com/efa", "rdmap16s27"}));
  EXPECT_EQ(MapDraDevice(efa, "neuron-1"), std::nullopt);
  EXPECT_EQ(MapDraDevice(efa, "efa-a.b"), std::nullopt);
  EXPECT_EQ(MapDraDevice(drv, "neuron-node"), (PlacedDraDevice{"aws.amazon.com/neuron", "", true}));
  for (const char* bad : {"neuron-node0", "neuron_node", "neuron-node-0", "Neuron-node"}) {
    EXPECT_EQ(MapDraDevice(drv, bad), std::nullopt) << bad;
  }
}

// Our UltraServer device holds every device and core of the node: PodResources lists one device,
// Holder answers it for any device or core no other assignment lists
// (docs/metrics.md#dra-attribution).
TEST(PodResourcesDraTest, NeuronNodeHoldsEveryDeviceAndCoreNotListedOtherwise) {
  v1::ListPodResourcesResponse list;
  auto add_pod = [&](const std::string& name, const std::string& device) {
    v1::PodResources* pod = list.add_pod_resources();
    pod->set_name(name);
    pod->set_namespace_("training");
    v1::ContainerResources* c = pod->add_containers();
    c->set_name("main");
    v1::DynamicResource* dyn = c->add_dynamic_resources();
    dyn->set_claim_name(name + "-claim");
    dyn->set_claim_namespace("training");
    v1::ClaimResource* r = dyn->add_claim_resources();
    r->set_driver_name(std::string(kDraDriverNeuron));
    r->set_pool_name("node-a");
    r->set_device_name(device);
  };
  add_pod("one", "neuron-2");
  add_pod("ultra", "neuron-node");
  const PodAssignments got = AssignmentsFromList(list);
  ASSERT_EQ(got.all().size(), 2u);
  EXPECT_TRUE(got.all()[1].whole_node);
  EXPECT_TRUE(got.all()[1].ids.empty());
  EXPECT_EQ(got.all()[1].claim->device, "neuron-node");
  EXPECT_EQ(got.Holder("aws.amazon.com/neuron", "2")->pod_name, "one");
  for (const auto& [resource, id] :
       std::vector<std::pair<std::string, std::string>>{{"aws.amazon.com/neuron", "0"},
                                                        {"aws.amazon.com/neuron", "15"},
                                                        {"aws.amazon.com/neurondevice", "7"},
                                                        {"aws.amazon.com/neuroncore", "63"}}) {
    const PodDeviceAssignment* h = got.Holder(resource, id);
    ASSERT_NE(h, nullptr) << resource << " " << id;
    EXPECT_EQ(h->pod_name, "ultra");
  }
  EXPECT_EQ(got.Holder("vpc.amazonaws.com/efa", "rdmap16s27"), nullptr);
  EXPECT_EQ(PodAssignments().Holder("aws.amazon.com/neuron", "0"), nullptr);
}

class FixedLister final : public v1::PodResourcesLister::Service {
 public:
  explicit FixedLister(v1::ListPodResourcesResponse r) : response_(std::move(r)) {}
  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* out) override {
    *out = response_;
    return grpc::Status::OK;
  }

 private:
  const v1::ListPodResourcesResponse response_;
};

// neuron-top and neuron-ls name a process's pod through this locator: a DRA pod is found by the
// device index and core id its process uses, as a device-plugin pod is.
TEST(PodResourcesDraTest, LocatorFindsADraPodByDeviceAndCore) {
  testing::TempDir dir;
  const std::string socket = (dir.path() / "kubelet.sock").string();
  FixedLister lister(Parse(kOurDriver));
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
  builder.RegisterService(&lister);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto cache = std::make_shared<PodResourcesCache>(
      PodResourcesCache::Options{.socket_path = socket, .period = 50ms, .timeout = 1s});
  ASSERT_TRUE(testing::WaitUntil([&] { return cache->refreshes() > 0; }, 10s));
  std::unique_ptr<PodLocator> locator = MakePodResourcesLocator(cache);
  absl::StatusOr<std::optional<PodIdentity>> by_device =
      locator->Locate({.pid = 1, .devices = {3}, .core_ids = {}});
  ASSERT_TRUE(by_device.ok());
  ASSERT_TRUE(by_device->has_value());
  EXPECT_EQ((*by_device)->name, "llama-0");
  EXPECT_EQ((*by_device)->namespace_name, "training");
  EXPECT_EQ((*by_device)->container, "main");
  absl::StatusOr<std::optional<PodIdentity>> by_core =
      locator->Locate({.pid = 1, .devices = {3}, .core_ids = {24}});
  ASSERT_TRUE(by_core.ok() && by_core->has_value());
  EXPECT_EQ((*by_core)->name, "llama-0");
  absl::StatusOr<std::optional<PodIdentity>> none =
      locator->Locate({.pid = 1, .devices = {2}, .core_ids = {}});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

}  // namespace
}  // namespace neuron
