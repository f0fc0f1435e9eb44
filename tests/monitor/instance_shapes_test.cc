// The exporter in-process on the instance shapes of physical counter sets and UltraServers
// (driver-sim trees, datastores in memory through FakeDatastores):
//   - per-logical-core series follow docs/metrics.md#labels-and-liveness over sysfs and the live
//     per-physical-core counter sets alike, on a trn2.48xlarge at LNC 2 and LNC 1 and on a
//     trn1.2xlarge: a logical core's counts sum its physical cores, its busy time is their mean;
//     the JSON stream's `v3d` figures are each physical core's own set;
//   - neuron_ultraserver_info on a trn2u.48xlarge, one series per configuration the class files
//     place the node in, and none on a trn2.48xlarge.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "core/model/catalog.h"
#include "driver-sim/driver/datastore_writer.h"
#include "driver-sim/driver/sim_tree.h"
#include "monitor/exporter.h"
#include "monitor/json_stream.h"
#include "tests/support/fake_datastores.h"
#include "tests/support/metrics_text.h"
#include "tests/support/sim_discovery.h"
#include "tests/support/temp_dir.h"

namespace neuron::monitor {
namespace {

using neuron::testing::FakeDatastores;
using neuron::testing::LinesStartingWith;
using neuron::testing::SampleValue;
using neuron::testing::TempDir;
namespace fs = std::filesystem;

constexpr int kPid = 4242;

class InstanceShapesTest : public ::testing::Test {
 protected:
  void MakeTree(std::string_view instance, int lnc, sim::UltraServerPosition us = {}) {
    absl::StatusOr<const InstanceSpec*> spec = FindInstance(instance);
    ASSERT_TRUE(spec.ok());
    spec_ = *spec;
    tree_ = std::make_unique<sim::SimTree>(
        RootPaths(dir_.path()),
        sim::NodeConfig{spec_, *ResolveLnc(*spec_, lnc), "i-0123456789abcdef0", "", us});
    ASSERT_TRUE(tree_->Create().ok());
  }
  void Inc(const fs::path& dir, uint64_t v) {
    ASSERT_TRUE(tree_->ApplyCounter(dir, sim::CounterOp::kInc, v).ok());
  }
  void Start() {
    ExporterStateOptions so;
    so.node.root = dir_.path();
    so.kubelet_dir = dir_.path() / "kubelet";
    so.share_window = std::chrono::milliseconds(0);
    so.pod_resources = false;
    so.sampling.threads = 1;
    so.node.lnc = tree_->config().lnc;
    so.sampling.datastore = [d = datastores_](const std::vector<int>&) { return d->Reader(); };
    so.node.bdf_resolver = testing::SimDiscoveryOptions(*spec_).bdf_resolver;
    source_ = std::make_unique<ExporterState>(so);
    ASSERT_TRUE(source_->Init().ok());
    source_->Start();
    exporter_ = std::make_unique<Exporter>(*source_, ExporterOptions{});
  }
  static std::string Core(const char* metric, int core, const std::string& extra = "") {
    return fmt::format("{}{{neuron_device=\"0\",neuroncore=\"{}\"{}}}", metric, core, extra);
  }

  TempDir dir_;
  const InstanceSpec* spec_ = nullptr;
  std::unique_ptr<sim::SimTree> tree_;
  std::shared_ptr<FakeDatastores> datastores_ = FakeDatastores::Make();
  std::unique_ptr<ExporterState> source_;
  std::unique_ptr<Exporter> exporter_;
};

struct Shape {
  const char* instance;
  int lnc;
};

class LogicalCoreFiguresTest : public InstanceShapesTest,
                               public ::testing::WithParamInterface<Shape> {};

// Logical core 1 of device 0 has physical cores {lnc, .., 2·lnc−1}: each gets a folded past in
// sysfs and a live set, with different values, so that a sum, a mean and a single core differ.
TEST_P(LogicalCoreFiguresTest, CountsSumThePhysicalCoresAndBusyTimeIsTheirMean) {
  const int lnc = GetParam().lnc;
  MakeTree(GetParam().instance, lnc);
  sim::DatastoreWriter& w = datastores_->Add(0, kPid);
  uint64_t busy_sum = 0, success = 0, flops = 0;
  for (int j = 0; j < lnc; ++j) {
    const int p = lnc + j;
    const uint64_t k = static_cast<uint64_t>(j) + 1;
    const uint64_t past_busy = 1'000'000 * k, live_busy = 500'000 * k;
    Inc(tree_->OtherInfoDir(0, p, "nc_time_in_use"), past_busy);
    Inc(tree_->StatusDir(0, p, "success"), 10 * k);
    Inc(tree_->OtherInfoDir(0, p, "flop_count"), 2000);
    ASSERT_TRUE(w.SetCoreCounter(p, nds::kTimeInUse, live_busy).ok());
    ASSERT_TRUE(w.SetCoreCounter(p, nds::kInferCompleted, 3 * k).ok());
    ASSERT_TRUE(w.SetCoreCounter(p, nds::kMacCount, 500).ok());
    busy_sum += past_busy + live_busy;
    success += 10 * k + 3 * k;
    flops += 2000 + 2 * 500;
  }
  // A set of another logical core (0) counts there only.
  ASSERT_TRUE(w.SetCoreCounter(0, nds::kInferCompleted, 100).ok());
  Start();
  const std::string text = exporter_->RenderMetrics();
  const uint64_t mean_us = busy_sum / static_cast<uint64_t>(lnc);
  EXPECT_EQ(SampleValue(text, Core("neuroncore_busy_seconds_total", 1)),
            static_cast<double>(mean_us) / 1e6)
      << text;
  EXPECT_EQ(SampleValue(text, Core("neuroncore_executions_total", 1)),
            static_cast<double>(success));
  EXPECT_EQ(SampleValue(text, Core("neuroncore_flops_total", 1)), static_cast<double>(flops));
  EXPECT_EQ(SampleValue(text, Core("neuroncore_executions_total", 0)), 100.0);
  EXPECT_EQ(SampleValue(text, Core("neuroncore_busy_seconds_total", 0)), 0.0);
  const int logical = spec_->chip->physical_cores / lnc;
  EXPECT_TRUE(SampleValue(text, Core("neuroncore_busy_seconds_total", logical - 1)).has_value());
  EXPECT_FALSE(SampleValue(text, Core("neuroncore_busy_seconds_total", logical)).has_value());
}

INSTANTIATE_TEST_SUITE_P(Shapes, LogicalCoreFiguresTest,
                         ::testing::Values(Shape{"trn2.48xlarge", 2}, Shape{"trn2.48xlarge", 1},
                                           Shape{"trn1.2xlarge", 1}),
                         [](const auto& info) {
                           return std::string(info.param.instance[3] == '2' ? "trn2" : "trn1") +
                                  "_lnc" + std::to_string(info.param.lnc);
                         });

// The JSON stream's per-physical-core utilization at LNC 2 comes from each physical core's set.
TEST_F(InstanceShapesTest, JsonStreamV3dIsEachPhysicalCoresOwnSet) {
  MakeTree("trn2.48xlarge", 2);
  sim::DatastoreWriter& w = datastores_->Add(0, kPid);
  ASSERT_TRUE(w.SetCoreCounter(2, nds::kMemUsageTensorsDevice, 4096).ok());  // holds logical 1
  Start();
  JsonStream stream(*source_, ExporterOptions{});
  (void)stream.Next();  // the first document has no period
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // Physical 2 busy far longer than the period (clamped to 100 %), physical 3 not at all.
  ASSERT_TRUE(w.SetCoreCounter(2, nds::kTimeInUse, 3'600'000'000).ok());
  const nlohmann::json doc = nlohmann::json::parse(stream.Next());
  const nlohmann::json& core =
      doc["neuron_runtime_data"][0]["report"]["neuroncore_counters"]["neuroncores_in_use"]["1"];
  ASSERT_TRUE(core.contains("v3d")) << doc.dump(1);
  EXPECT_EQ(core["v3d"]["nc_v3.2"]["neuroncore_utilization"], 100.0);
  EXPECT_EQ(core["v3d"]["nc_v3.3"]["neuroncore_utilization"], 0.0);
  EXPECT_EQ(core["neuroncore_utilization"], 100.0);  // the pair's mean, clamped
}

TEST_F(InstanceShapesTest, UltraServerInfoOnANodeInAnUltraServer) {
  MakeTree("trn2u.48xlarge", 0, {.nodes = 4, .node_id = 2, .server_id = 0x5eed0000000000a1});
  Start();
  const std::string text = exporter_->RenderMetrics();
  EXPECT_EQ(SampleValue(text,
                        "neuron_ultraserver_info{mode=\"x4\",node_id=\"2\",server_id="
                        "\"5eed0000000000a1\"}"),
            1.0)
      << text;
  // The 2-node view pairs nodes 0-1 and 2-3 (X2V); the second pair's serial is one less.
  EXPECT_EQ(SampleValue(text,
                        "neuron_ultraserver_info{mode=\"x2v\",node_id=\"0\",server_id="
                        "\"5eed0000000000a0\"}"),
            1.0);
  EXPECT_EQ(LinesStartingWith(text, "neuron_ultraserver_info{").size(), 2u);
}

TEST_F(InstanceShapesTest, NoUltraServerInfoOutsideOne) {
  MakeTree("trn2.48xlarge", 0);
  Start();
  const std::string text = exporter_->RenderMetrics();
  EXPECT_TRUE(LinesStartingWith(text, "neuron_ultraserver_info{").empty()) << text;
  EXPECT_EQ(SampleValue(text, "neuron_exporter_collector_success{collector=\"ultraserver\"}"), 1.0);
}

}  // namespace
}  // namespace neuron::monitor
