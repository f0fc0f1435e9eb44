// neuron-top, the exporter's compat series and its JSON stream name the same cores for each
// runtime process (core/sample/process_usage.h, docs/style.md#derive-once). One trn1.2xlarge
// node, three processes whose datastores show different kinds of use per core: busy time, device
// memory only, a model record only, a model load only, nothing. All three consumers read the
// same ExporterState. (The driver's lock map, the fourth kind of evidence, is not in the
// datastore's bytes, so FakeDatastores cannot carry it: tests/core/process_usage_test.cc covers
// it.)

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "core/model/catalog.h"
#include "driver-sim/driver/datastore_writer.h"
#include "driver-sim/driver/sim_tree.h"
#include "monitor/exporter.h"
#include "monitor/json_stream.h"
#include "tests/support/fake_datastores.h"
#include "tests/support/sim_discovery.h"
#include "tests/support/temp_dir.h"
#include "top/view_model.h"

namespace neuron::monitor {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using Held = std::map<std::string, std::set<int>>;  // runtime tag -> global core ids

class HeldCoresTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.path() / "root";
    spec_ = *FindInstance("trn1.2xlarge");
    tree_ = std::make_unique<sim::SimTree>(
        RootPaths(root_),
        sim::NodeConfig{spec_, *ResolveLnc(*spec_, 0), "i-0123456789abcdef0", ""});
    ASSERT_TRUE(tree_->Create().ok());
    // "busy-and-memory": core 0 ran, core 1 only holds tensors.
    sim::DatastoreWriter& a = datastores_->Add(0, 101);
    datastores_->SetRecords(0, 101).process.long_tag = "busy-and-memory";
    ASSERT_TRUE(a.SetCoreCounter(0, nds::kTimeInUse, 1'000'000).ok());
    ASSERT_TRUE(a.SetCoreCounter(1, nds::kMemUsageTensorsDevice, 4096).ok());
    // "loaded": a model loaded on core 0 (its record and its load count), model code on core 1.
    sim::DatastoreWriter& b = datastores_->Add(0, 102);
    RuntimeRecords& loaded = datastores_->SetRecords(0, 102);
    loaded.process.long_tag = "loaded";
    loaded.models.push_back(RuntimeModel{.model_id = 7, .name = "m", .nc_index = 0});
    ASSERT_TRUE(b.SetCoreCounter(0, nds::kModelLoadCount, 1).ok());
    ASSERT_TRUE(b.SetCoreCounter(1, nds::kMemUsageCodeDevice, 1).ok());
    // "idle": a datastore and nothing in it.
    datastores_->Add(0, 103);
    datastores_->SetRecords(0, 103).process.long_tag = "idle";

    ExporterStateOptions so;
    so.node.root = root_;
    so.kubelet_dir = dir_.path() / "kubelet";
    so.share_window = std::chrono::milliseconds(0);
    so.pod_resources = false;
    so.sampling.threads = 1;
    so.sampling.datastore = [d = datastores_](std::vector<int>) { return d->Reader(); };
    so.sampling.records = [d = datastores_] { return d->Records(); };
    so.node.bdf_resolver = testing::SimDiscoveryOptions(*spec_).bdf_resolver;
    source_ = std::make_unique<ExporterState>(so);
    ASSERT_TRUE(source_->Init().ok());
    source_->Start();
  }

  // neuron-top's process table.
  Held FromTop() {
    const ExporterView view = source_->Get();
    top::ViewInputs in;
    in.inventory = view.inventory.get();
    in.after = view.current.get();
    Held held;
    for (const top::ProcessRow& p : top::BuildView(in).processes) {
      held[p.tag].insert(p.core_ids.begin(), p.core_ids.end());
    }
    return held;
  }

  // The compat per-core memory series, which exist for exactly the cores a process holds.
  Held FromCompat() {
    ExporterOptions eo;
    eo.compat = true;
    const std::string text = Exporter(*source_, eo).RenderMetrics();
    static const std::regex kSeries(
        R"re(^neuroncore_memory_usage_tensors\{.*neuroncore="(\d+)".*runtime_tag="([^"]*)".*)re");
    Held held;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (std::regex_match(line, m, kSeries)) held[m[2]].insert(std::stoi(m[1]));
    }
    return held;
  }

  // The JSON stream's per-core memory breakdown, keyed by the cores a process holds.
  Held FromJson() {
    const nlohmann::json doc = nlohmann::json::parse(JsonStream(*source_, {}).Next());
    Held held;
    for (const nlohmann::json& rt : doc["neuron_runtime_data"]) {
      std::set<int>& cores = held[rt["neuron_runtime_tag"].get<std::string>()];
      for (const auto& [nc, usage] : rt["report"]["memory_used"]["neuron_runtime_used_bytes"]
                                       ["usage_breakdown"]["neuroncore_memory_usage"]
                                           .items()) {
        cores.insert(std::stoi(nc));
      }
    }
    return held;
  }

  testing::TempDir dir_;
  std::filesystem::path root_;
  const InstanceSpec* spec_ = nullptr;
  std::unique_ptr<sim::SimTree> tree_;
  std::shared_ptr<testing::FakeDatastores> datastores_ = testing::FakeDatastores::Make();
  std::unique_ptr<ExporterState> source_;
};

TEST_F(HeldCoresTest, TopCompatAndJsonNameTheSameCores) {
  Held top = FromTop();
  EXPECT_THAT(top["busy-and-memory"], ElementsAre(0, 1));
  EXPECT_THAT(top["loaded"], ElementsAre(0, 1));
  EXPECT_THAT(top["idle"], IsEmpty());
  // Compat and JSON list only processes holding something; top lists every process.
  Held expected = top;
  expected.erase("idle");
  EXPECT_EQ(FromCompat(), expected);
  Held json = FromJson();
  EXPECT_THAT(json["idle"], IsEmpty());
  json.erase("idle");
  EXPECT_EQ(json, expected);
}

}  // namespace
}  // namespace neuron::monitor
