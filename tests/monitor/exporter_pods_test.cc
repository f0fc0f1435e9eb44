// The exporter's pod attribution (docs/metrics.md#pod-attribution) against a real PodResources
// gRPC server on a Unix socket: pod labels, kept while the kubelet is gone; and a hostile answer
// whose device and core IDs the node does not have, which gets no series.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <regex>

#include "podresources/v1/api.grpc.pb.h"
#include "tests/monitor/exporter_fixture.h"
#include "tests/support/process.h"

namespace neuron::monitor {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using neuron::testing::WriteFile;

class FakeLister final : public v1::PodResourcesLister::Service {
 public:
  using Devices = std::vector<std::pair<std::string, std::vector<std::string>>>;
  explicit FakeLister(Devices devices = {{"aws.amazon.com/neuroncore", {"1"}}}, Devices claims = {})
      : devices_(std::move(devices)), claims_(std::move(claims)) {}

  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* out) override {
    v1::PodResources* pod = out->add_pod_resources();
    pod->set_name("llama-0");
    pod->set_namespace_("training");
    v1::ContainerResources* c = pod->add_containers();
    c->set_name("main");
    for (const auto& [resource, ids] : devices_) {
      v1::ContainerDevices* d = c->add_devices();
      d->set_resource_name(resource);
      for (const std::string& id : ids) d->add_device_ids(id);
    }
    // DynamicResource entries: claim name -> devices of the driver neuron.aws.com.
    for (const auto& [claim, names] : claims_) {
      v1::DynamicResource* dr = c->add_dynamic_resources();
      dr->set_claim_name(claim);
      dr->set_claim_namespace("training");
      for (const std::string& name : names) {
        v1::ClaimResource* r = dr->add_claim_resources();
        r->set_driver_name("neuron.aws.com");
        r->set_pool_name("node-1");
        r->set_device_name(name);
      }
    }
    return grpc::Status::OK;
  }

  // Serves on DIR/kubelet/pod-resources/kubelet.sock, where Options(pods=true) looks.
  std::unique_ptr<grpc::Server> Serve(const fs::path& dir) {
    const fs::path sock_dir = dir / "kubelet/pod-resources";
    fs::create_directories(sock_dir);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + (sock_dir / "kubelet.sock").string(),
                             grpc::InsecureServerCredentials());
    builder.RegisterService(this);
    return builder.BuildAndStart();
  }

 private:
  Devices devices_;
  Devices claims_;
};

TEST_F(ExporterTest, PodLabelsFromPodResources) {
  BuildNode();
  FakeLister lister;
  std::unique_ptr<grpc::Server> server = lister.Serve(dir_.path());
  ASSERT_NE(server, nullptr);
  Start(false, /*pods=*/true);
  const std::string series =
      "neuroncore_allocation_info{neuron_device=\"0\",neuroncore=\"1\",resource=\"aws.amazon.com/"
      "neuroncore\",namespace=\"training\",pod=\"llama-0\",container=\"main\"}";
  EXPECT_TRUE(neuron::testing::WaitUntil(
      [&] { return Value(exporter_->RenderMetrics(), series) == 1; }, 10s));
  const std::string text = exporter_->RenderMetrics();
  EXPECT_TRUE(HasMetric(text, "neuron_device_allocation_info{neuron_device=\"0\""));
  EXPECT_FALSE(HasMetric(text, "neuroncore_allocation_info{neuron_device=\"0\",neuroncore=\"0\""));
  EXPECT_EQ(Value(text, "neuron_exporter_pod_resources_errors_total"), 0);
  const std::string pods_up = "neuron_exporter_source_up{source=\"podresources\"}";
  EXPECT_TRUE(neuron::testing::WaitUntil(
      [&] { return Value(exporter_->RenderMetrics(), pods_up) == 1; }, 10s));
  // The kubelet going away keeps the scrape fast and the last answer (a kubelet restart must
  // not break every pod join), and the source says it is down.
  server->Shutdown();
  const auto t0 = std::chrono::steady_clock::now();
  std::string later = exporter_->RenderMetrics();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  EXPECT_EQ(Value(later, series), 1);
  EXPECT_TRUE(neuron::testing::WaitUntil(
      [&] { return Value(later = exporter_->RenderMetrics(), pods_up) == 0; }, 10s));
  EXPECT_EQ(Value(later, series), 1);
}

// docs/metrics.md#pod-attribution: the kubelet's IDs are outside input. Only an index below the
// driver's limits that names a device of this node gets a series, whatever the answer holds: no
// overflow, no device that was unplugged (3) or that no driver could make (a planted neuronN
// with N = INT_MAX, which is not a device either).
TEST_F(ExporterTest, HostilePodResourcesIdsGetNoSeries) {
  BuildNode("inf2.24xlarge");  // devices 0-5, two cores each
  ASSERT_TRUE(tree_->RemoveDevice(3).ok());
  WriteFile(root_ / "sys/class/neuron_device/neuron2147483647/reset", "1\n");
  const std::vector<std::string> hostile = {
      "3",  "6",   "64", "2147483647", "4294967296",           "-1",
      "01", "1e3", " 1", "",           "99999999999999999999", "0x1"};
  std::vector<std::string> cores = hostile;
  for (const char* id : {"7", "128", "4294967297"}) cores.emplace_back(id);  // 7: device 3's
  cores.emplace_back("3");                                                   // device 1, core 1
  std::vector<std::string> devices = hostile;
  devices.emplace_back("0");
  FakeLister lister({{"aws.amazon.com/neuron", devices}, {"aws.amazon.com/neuroncore", cores}});
  std::unique_ptr<grpc::Server> server = lister.Serve(dir_.path());
  ASSERT_NE(server, nullptr);
  Start(false, /*pods=*/true);
  const std::string core3 =
      "neuroncore_allocation_info{neuron_device=\"1\",neuroncore=\"3\",resource=\"aws.amazon.com/"
      "neuroncore\",namespace=\"training\",pod=\"llama-0\",container=\"main\"}";
  std::string text;
  EXPECT_TRUE(neuron::testing::WaitUntil(
      [&] { return Value(text = exporter_->RenderMetrics(), core3) == 1; }, 10s))
      << text;
  std::set<std::string> devices_seen;
  std::set<std::string> cores_seen;
  const std::regex series(
      R"re(^(neuron_device|neuroncore)_allocation_info\{neuron_device="(\d+)"(,neuroncore="(\d+)")?.*)re");
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, series)) continue;
    if (m[1] == "neuron_device") devices_seen.insert(m[2]);
    if (m[1] == "neuroncore") cores_seen.insert(m[2].str() + "/" + m[4].str());
  }
  EXPECT_EQ(devices_seen, (std::set<std::string>{"0", "1"}));
  EXPECT_EQ(cores_seen, (std::set<std::string>{"0/0", "0/1", "1/3"}));
}

// docs/metrics.md#dra-attribution: a DRA claim's devices join the same allocation series as a
// device-plugin grant, with the driver as `resource` and the claim's name; every claim device,
// placed or not, also gets neuron_dra_device_allocation_info under the name its driver gave it.
TEST_F(ExporterTest, DraClaimsAttributeDevicesCoresAndUnplacedNames) {
  BuildNode("inf2.24xlarge");  // devices 0-5, two cores each
  FakeLister lister({}, {{"llama-0-neurons-x7k2p", {"neuron-2", "neurondevice4", "neuron-9"}},
                         {"llama-0-core", {"neuroncore-3", "neuron_node-0"}}});
  std::unique_ptr<grpc::Server> server = lister.Serve(dir_.path());
  ASSERT_NE(server, nullptr);
  Start(false, /*pods=*/true);
  const std::string pod =
      "namespace=\"training\",pod=\"llama-0\",container=\"main\",claim=\"llama-0-neurons-x7k2p\"";
  const std::string device2 =
      "neuron_device_allocation_info{neuron_device=\"2\",resource=\"neuron."
      "aws.com\"," +
      pod + "}";
  std::string text;
  EXPECT_TRUE(neuron::testing::WaitUntil(
      [&] { return Value(text = exporter_->RenderMetrics(), device2) == 1; }, 10s))
      << text;
  EXPECT_EQ(Value(text,
                  "neuroncore_allocation_info{neuron_device=\"2\",neuroncore=\"5\",resource="
                  "\"neuron.aws.com\"," +
                      pod + "}"),
            1);
  // AWS's name for device 4.
  EXPECT_EQ(Value(text,
                  "neuron_device_allocation_info{neuron_device=\"4\",resource=\"neuron.aws."
                  "com\"," +
                      pod + "}"),
            1);
  // A core claim: the core, and its device once.
  const std::string core_pod =
      "namespace=\"training\",pod=\"llama-0\",container=\"main\",claim=\"llama-0-core\"";
  EXPECT_EQ(Value(text,
                  "neuroncore_allocation_info{neuron_device=\"1\",neuroncore=\"3\",resource="
                  "\"neuron.aws.com\"," +
                      core_pod + "}"),
            1);
  EXPECT_FALSE(HasMetric(text, "neuroncore_allocation_info{neuron_device=\"1\",neuroncore=\"2\""));
  // neuron-9 is not on this node and neuron_node-0 names no index: no indexed series, but both
  // are reported as their driver named them.
  EXPECT_FALSE(HasMetric(text, "neuron_device_allocation_info{neuron_device=\"9\""));
  for (const auto& [claim, device] :
       std::vector<std::pair<std::string, std::string>>{{"llama-0-neurons-x7k2p", "neuron-9"},
                                                        {"llama-0-neurons-x7k2p", "neuron-2"},
                                                        {"llama-0-core", "neuron_node-0"}}) {
    std::string series =
        "neuron_dra_device_allocation_info{driver=\"neuron.aws.com\",pool=\"node-1\",device=\"";
    series += device;
    series += "\",namespace=\"training\",pod=\"llama-0\",container=\"main\",claim=\"";
    series += claim;
    series += "\"}";
    EXPECT_EQ(Value(text, series), 1) << device;
  }
}

// docs/metrics.md#dra-attribution: our UltraServer device `neuron-node` holds every device of the
// node with all its cores; `neuroncore-<c>` is placed at the node's logical cores per device (4
// on a trn2.48xlarge at LNC 2: core 5 is device 1's).
TEST_F(ExporterTest, DraNeuronNodeHoldsEveryDeviceAndCoresFollowTheNodesLnc) {
  BuildNode("trn2.48xlarge");
  FakeLister lister({}, {{"ultra", {"neuron-node"}}, {"one-core", {"neuroncore-5"}}});
  std::unique_ptr<grpc::Server> server = lister.Serve(dir_.path());
  ASSERT_NE(server, nullptr);
  Start(false, /*pods=*/true);
  auto labels = [](const std::string& claim) {
    return "resource=\"neuron.aws.com\",namespace=\"training\",pod=\"llama-0\",container="
           "\"main\",claim=\"" +
           claim + "\"}";
  };
  const std::string core5 =
      "neuroncore_allocation_info{neuron_device=\"1\",neuroncore=\"5\"," + labels("one-core");
  std::string text;
  ASSERT_TRUE(neuron::testing::WaitUntil(
      [&] { return Value(text = exporter_->RenderMetrics(), core5) == 1; }, 10s))
      << text;
  for (int d = 0; d < 16; ++d) {
    EXPECT_EQ(Value(text, "neuron_device_allocation_info{neuron_device=\"" + std::to_string(d) +
                              "\"," + labels("ultra")),
              1)
        << d;
  }
  EXPECT_EQ(Value(text, "neuroncore_allocation_info{neuron_device=\"15\",neuroncore=\"63\"," +
                            labels("ultra")),
            1)
      << text;
  EXPECT_FALSE(HasMetric(text, "neuron_device_allocation_info{neuron_device=\"16\""));
}

}  // namespace
}  // namespace neuron::monitor
