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
  explicit FakeLister(Devices devices = {{"aws.amazon.com/neuroncore", {"1"}}})
      : devices_(std::move(devices)) {}

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

}  // namespace
}  // namespace neuron::monitor
