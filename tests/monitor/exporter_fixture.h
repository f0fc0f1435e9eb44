#pragma once
// The fixture of the exporter's in-process tests (exporter_test.cc, exporter_pods_test.cc): a
// driver-sim tree with one runtime whose datastore and records live in memory (FakeDatastores:
// only a process under the simulated driver can read real ones), an ExporterState over it and an
// Exporter; and the helpers that read one series out of a rendering. Not in an anonymous
// namespace: GoogleTest requires one fixture type for a suite spread over two files.

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/catalog.h"
#include "driver-sim/driver/datastore_writer.h"
#include "driver-sim/driver/sim_tree.h"
#include "monitor/exporter.h"
#include "tests/support/fake_datastores.h"
#include "tests/support/sim_discovery.h"
#include "tests/support/sim_testing.h"
#include "tests/support/temp_dir.h"

namespace neuron::monitor {

inline constexpr int kPid = 4242;

// The value of the one sample `series` (name{labels} exactly as rendered), or nullopt.
inline std::optional<double> Value(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return std::nullopt;
}

inline bool HasMetric(const std::string& text, const std::string& prefix) {
  return text.find("\n" + prefix) != std::string::npos;
}

inline bool HasFamily(const std::string& text, std::string_view name) {
  return text.find("# TYPE " + std::string(name) + " ") != std::string::npos;
}

class ExporterTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = dir_.path() / "root"; }

  // A trn1.2xlarge with one runtime on device 0 using both cores, ECC errors, a valid power
  // reading, a folded-in past process (sysfs totals) and a NEURON_HW_ERR record.
  void BuildNode(std::string_view instance = "trn1.2xlarge") {
    // A fixed instance id: goldens must not depend on the temporary path.
    tree_ = testing::MakeSimTree(root_, instance, {.instance_id = "i-aabbccdd123456789"});
    ASSERT_NE(tree_, nullptr);
    spec_ = tree_->config().spec;
    writer_ = &datastores_->Add(0, kPid);
    // What libnrt reads of the runtime's records.
    RuntimeRecords& records = datastores_->SetRecords(0, kPid);
    records.process.tag = "train";
    records.process.long_tag = "llama-train";
    records.process.runtime_version = {2, 28, 0};
    records.models.push_back(RuntimeModel{.model_id = 7, .name = "llama2-7b", .nc_index = 0});
    for (int core = 0; core < 2; ++core) {
      ASSERT_TRUE(writer_->SetCoreCounter(core, nds::kTimeInUse, 3'000'000 + core).ok());
      ASSERT_TRUE(writer_->SetCoreCounter(core, nds::kInferCompleted, 100 + core).ok());
      ASSERT_TRUE(writer_->SetCoreCounter(core, nds::kInferTimedOut, 2).ok());
      ASSERT_TRUE(writer_->SetCoreCounter(core, nds::kErrNumerical, 1).ok());
      ASSERT_TRUE(writer_->SetCoreCounter(core, nds::kMacCount, 1'000'000).ok());
      ASSERT_TRUE(writer_->SetCoreCounter(core, nds::kMemUsageTensorsDevice, 1 << 20).ok());
      ASSERT_TRUE(writer_->SetCoreCounter(core, nds::kModelLoadCount, 1).ok());
      ASSERT_TRUE(writer_->SetCoreCounter(core, nds::kLatencyTotal, 250'000).ok());
      ASSERT_TRUE(writer_->SetCoreCounter(core, nds::kLatencyDevice, 200'000).ok());
    }
    ASSERT_TRUE(writer_->SetDeviceCounter(nds::kMemUsageTensorsHost, 4096).ok());
    ASSERT_TRUE(tree_->AddHardwareErrors(0, "mem_ecc_uncorrected", 3).ok());
    ASSERT_TRUE(tree_->WritePower(0, "POWER_STATUS_VALID", 1700000000, 1000, 4000, 2550).ok());
    ASSERT_TRUE(
        tree_->ApplyCounter(tree_->StatusDir(0, 1, "hw_error"), sim::CounterOp::kInc, 5).ok());
    ASSERT_TRUE(tree_
                    ->ApplyCounter(tree_->OtherInfoDir(0, 0, "nc_time_in_use"),
                                   sim::CounterOp::kInc, 2'000'000)
                    .ok());
    ASSERT_TRUE(
        tree_->ApplyCounter(tree_->DeviceMemDir(0, 0, "tensors"), sim::CounterOp::kInc, 1 << 20)
            .ok());
  }

  // The node's source options, the datastores read from datastores_.
  ExporterStateOptions Options(
      bool pods = false, std::chrono::milliseconds share = std::chrono::milliseconds(0)) const {
    ExporterStateOptions so;
    so.node.root = root_;
    so.kubelet_dir = dir_.path() / "kubelet";
    so.share_window = share;
    so.pod_resources = pods;
    so.pod_refresh = std::chrono::milliseconds(100);
    so.sampling.threads = 1;
    so.sampling.datastore = [d = datastores_](const std::vector<int>&) { return d->Reader(); };
    so.sampling.records = [d = datastores_] { return d->Records(); };
    // No driver behind this tree: PCI addresses as the simulated driver would answer them.
    if (spec_ != nullptr) so.node.bdf_resolver = testing::SimDiscoveryOptions(*spec_).bdf_resolver;
    return so;
  }

  void Start(bool compat, bool pods = false,
             std::chrono::milliseconds share = std::chrono::milliseconds(0)) {
    StartWith(Options(pods, share), compat);
  }
  void StartWith(const ExporterStateOptions& so, bool compat) {
    source_ = std::make_unique<ExporterState>(so);
    ASSERT_TRUE(source_->Init().ok());
    source_->Start();
    ExporterOptions eo;
    eo.compat = compat;
    eo.region = "us-east-2";
    eo.availability_zone = "us-east-2b";
    exporter_ = std::make_unique<Exporter>(*source_, eo);
  }

  testing::TempDir dir_;
  std::filesystem::path root_;
  std::unique_ptr<sim::SimTree> tree_;
  const InstanceSpec* spec_ = nullptr;
  std::shared_ptr<testing::FakeDatastores> datastores_ = testing::FakeDatastores::Make();
  sim::DatastoreWriter* writer_ = nullptr;  // device 0's runtime, in datastores_
  std::unique_ptr<ExporterState> source_;
  std::unique_ptr<Exporter> exporter_;
};

}  // namespace neuron::monitor
