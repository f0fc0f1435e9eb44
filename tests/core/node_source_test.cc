// core/node/node_source.h on a simulated tree without a simulated driver (PCI addresses from a
// table, datastores from tests/support/fake_datastores.h): rescans say when the inventory
// changed, the Sampler follows them, and Events arrive in the mode discovery reads; and
// HwErrorCounts on a kernel log written here.

#include "core/node/node_source.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "core/model/catalog.h"
#include "core/node/hw_error_counts.h"
#include "driver-sim/driver/sim_tree.h"
#include "tests/support/fake_datastores.h"
#include "tests/support/sim_discovery.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

class NodeSourceTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(tree_.Create().ok()); }

  NodeSourceOptions Options() const {
    const DiscoveryOptions d = testing::SimDiscoveryOptions(*spec_);
    return NodeSourceOptions{.root = dir_.path(),
                             .discovery = DiscoveryMode::kDirectory,
                             .lnc = 0,
                             .bdf_resolver = d.bdf_resolver,
                             .catalog_stands_in = false};
  }

  testing::TempDir dir_;
  const InstanceSpec* spec_ = *FindInstance("trn1.32xlarge");
  sim::SimTree tree_{RootPaths(dir_.path()), sim::NodeConfig{spec_, 1, "i-0123456789abcdef0", ""}};
};

TEST_F(NodeSourceTest, ARescanSaysWhetherTheInventoryChanged) {
  NodeSource node(Options());
  ASSERT_TRUE(node.Init().ok());
  EXPECT_EQ(node.inventory(), nullptr) << "Init scans nothing";

  absl::StatusOr<NodeSource::Scan> first = node.Rescan();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->changed);
  EXPECT_EQ(first->inventory->devices.size(), 16u);
  EXPECT_EQ(first->inventory->instance_type, "trn1.32xlarge");
  EXPECT_EQ(node.inventory(), first->inventory);

  absl::StatusOr<NodeSource::Scan> again = node.Rescan();
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->changed);
  EXPECT_EQ(again->inventory, first->inventory) << "an unchanged scan keeps the same inventory";

  ASSERT_TRUE(tree_.RemoveDevice(3).ok());
  absl::StatusOr<NodeSource::Scan> after = node.Rescan();
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->changed);
  EXPECT_EQ(after->inventory->devices.size(), 15u);
  EXPECT_EQ(node.inventory(), after->inventory);
}

TEST_F(NodeSourceTest, TheSamplerReadsWhatTheLastRescanFound) {
  NodeSource node(Options());
  ASSERT_TRUE(node.Init().ok());
  ASSERT_TRUE(node.Rescan().ok());
  std::shared_ptr<testing::FakeDatastores> stores = testing::FakeDatastores::Make();
  std::vector<int> handed;
  const bool answered =
      node.StartSampling(SamplingOptions{.threads = 1,
                                         .datastore =
                                             [&](std::vector<int> devices) {
                                               handed = std::move(devices);
                                               return stores->Reader();
                                             },
                                         .records = {},
                                         .libnrt = "",
                                         .first_probe_wait = std::chrono::milliseconds(1000)});
  EXPECT_TRUE(answered);
  EXPECT_EQ(handed.size(), 16u) << "the datastore reader gets the inventory's devices";

  std::shared_ptr<const Snapshot> full = node.Sample(SampleKind::kFull);
  ASSERT_NE(full, nullptr);
  EXPECT_EQ(full->devices.size(), 16u);
  EXPECT_NE(full->FindDevice(3), nullptr);

  ASSERT_TRUE(tree_.RemoveDevice(3).ok());
  ASSERT_TRUE(node.Rescan().ok());
  std::shared_ptr<const Snapshot> after = node.Sample(SampleKind::kHot);
  EXPECT_EQ(after->devices.size(), 15u);
  EXPECT_EQ(after->FindDevice(3), nullptr);
}

TEST_F(NodeSourceTest, WatchDeliversEventsUntilStopped) {
  NodeSource node(Options());
  ASSERT_TRUE(node.Init().ok());
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Event> seen;
  ASSERT_TRUE(node.Watch(std::chrono::milliseconds(100),
                         [&](const Event& e) {
                           std::lock_guard<std::mutex> lock(mu);
                           seen.push_back(e);
                           cv.notify_all();
                         })
                  .ok());
  ASSERT_TRUE(tree_.RemoveDevice(7).ok());
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(5), [&] {
      return std::any_of(seen.begin(), seen.end(), [](const Event& e) {
        return e.kind == EventKind::kDeviceRemoved && e.device == 7;
      });
    }));
  }
  node.StopWatching();
  const size_t before = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return seen.size();
  }();
  ASSERT_TRUE(tree_.AddDevice(7).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(seen.size(), before) << "no event after StopWatching";
}

void Append(const std::filesystem::path& p, std::string_view data) {
  std::ofstream(p, std::ios::app | std::ios::binary) << data;
}

TEST(HwErrorCountsTest, CountsRecordsNamingADeviceFromWhereCountingStarts) {
  testing::TempDir dir;
  const std::filesystem::path kmsg = dir.path() / "kmsg";
  HwErrorCounts counts(kmsg);
  HwErrorTally tally;
  EXPECT_FALSE(counts.Read(&tally).ok()) << "not open yet";
  EXPECT_FALSE(counts.Open(KmsgReader::StartAt::kEnd).ok()) << "no log yet";
  EXPECT_FALSE(counts.is_open());

  Append(kmsg, "3,1,1,-;NEURON_HW_ERR=SRAM_UNCORRECTABLE_ERROR nd-id=1\n");
  ASSERT_TRUE(counts.Open(KmsgReader::StartAt::kEnd).ok());
  ASSERT_TRUE(counts.Read(&tally).ok());
  EXPECT_TRUE(tally.empty()) << "records already in the log are history";

  Append(kmsg,
         "3,2,2,-;NEURON_HW_ERR=SRAM_UNCORRECTABLE_ERROR nd-id=1\n"
         "3,3,3,-;NEURON_HW_ERR=SRAM_UNCORRECTABLE_ERROR nd-id=1\n"
         "3,4,4,-;NEURON_HW_ERR=HBM_UNCORRECTABLE_ERROR nd-id=4\n"
         "3,5,5,-;NEURON_HW_ERR=DMA_ERROR\n"  // no nd-id: no device to count it against
         "6,6,6,-;an unrelated line\n"
         "6,7,7,-;neuron:npid_attach: neuron:npid_attach: pid=7, slot=0\n");
  ASSERT_TRUE(counts.Read(&tally).ok());
  EXPECT_EQ(counts.open_close_records(), 1u);
  const HwErrorTally expected = {{1, {{"SRAM_UNCORRECTABLE_ERROR", 2}}},
                                 {4, {{"HBM_UNCORRECTABLE_ERROR", 1}}}};
  EXPECT_EQ(tally, expected);

  HwErrorCounts late(kmsg);  // a log that appeared after counting started: all of it is new
  ASSERT_TRUE(late.Open(KmsgReader::StartAt::kBeginning).ok());
  HwErrorTally all;
  ASSERT_TRUE(late.Read(&all).ok());
  EXPECT_EQ(all[1]["SRAM_UNCORRECTABLE_ERROR"], 3u);
}

}  // namespace
}  // namespace neuron
