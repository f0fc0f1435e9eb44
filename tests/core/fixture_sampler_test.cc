// The Sampler on trees built from the checked-in manifests of the driver's interface
// (tests/fixtures/driver/), not from our simulator: every counter file of a device, its cores
// and an EFA must be found under the names of core/driver/sysfs_files.h and sysfs_names.h and
// parsed to the manifests' values.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/discovery/bdf.h"
#include "core/discovery/inventory.h"
#include "core/sample/sampler.h"
#include "tests/support/fixture_tree.h"
#include "tests/support/no_datastores.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

namespace fs = std::filesystem;
using ::testing::DoubleEq;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Optional;

constexpr size_t kSuccess = Index(StatusCounter::success);

using testing::NoDatastores;  // these tests are about sysfs

class FixtureSamplerTest : public ::testing::Test {
 protected:
  // Builds tests/fixtures/driver/<manifest>, discovers it (PCI addresses as the driver would
  // answer them) and starts a Sampler on it.
  void Start(std::string_view manifest, std::vector<std::string> bdfs) {
    absl::Status s = testing::BuildFixtureTree(testing::DriverFixture(manifest), tmp_.path());
    ASSERT_TRUE(s.ok()) << s;
    DiscoveryOptions options;
    options.bdf_resolver = [bdfs](const RootPaths&) { return MakeTableBdfResolver(bdfs); };
    absl::StatusOr<Inventory> inv = MakeDirectoryDiscovery(root(), options)->Scan();
    ASSERT_TRUE(inv.ok()) << inv.status();
    SamplerOptions so;
    so.datastore = std::make_unique<NoDatastores>();
    sampler_ = std::make_unique<Sampler>(root(), *inv, std::move(so));
  }

  RootPaths root() const { return RootPaths(tmp_.path()); }

  testing::TempDir tmp_;
  std::unique_ptr<Sampler> sampler_;
};

void ExpectMem(const MemCounter& m, uint64_t v) {
  EXPECT_THAT(m.total, Optional(v));
  EXPECT_THAT(m.present, Optional(v));
  EXPECT_THAT(m.peak, Optional(v));
}

void ExpectPair(const CounterPair& p, uint64_t v) {
  EXPECT_THAT(p.total, Optional(v));
  EXPECT_THAT(p.present, Optional(v));
}

TEST_F(FixtureSamplerTest, Trn1TwoXlargeDeviceFilesAreAllRead) {
  Start("trn1.2xlarge.manifest", {"0000:00:1e.0"});
  const std::shared_ptr<const Snapshot> snap = sampler_->Sample(SampleKind::kFull);
  EXPECT_THAT(snap->errors, IsEmpty());
  ASSERT_EQ(snap->devices.size(), 1u);
  const DeviceSample& d = snap->devices[0];
  EXPECT_EQ(d.state, DeviceState::kReady);
  EXPECT_EQ(d.serial_number, "3c5a1e9b7d2f4a60");
  ForEachCounter(
      d.hardware, kHardwareCounters,
      [](std::string_view, const std::optional<uint64_t>& v) { EXPECT_THAT(v, Optional(0u)); });
  ASSERT_TRUE(d.power.has_value());
  EXPECT_EQ(d.power->status, PowerStatus::kValid);
  EXPECT_EQ(d.power->epoch_s, 1735689600);
  EXPECT_THAT(d.power->min_percent, DoubleEq(12.34));
  EXPECT_THAT(d.power->max_percent, DoubleEq(56.78));
  EXPECT_THAT(d.power->avg_percent, DoubleEq(34.56));
  for (size_t c = 0; c < d.host_mem.size(); ++c) {
    ExpectMem(d.host_mem[c], c == Index(HostMemCategory::driver_memory) ? 4456448 : 0);
  }
  ASSERT_EQ(d.cores.size(), 2u);
  for (size_t c = 0; c < d.cores.size(); ++c) {
    SCOPED_TRACE(c);
    const CoreSample& core = d.cores[c];
    for (size_t i = 0; i < core.status.size(); ++i) {
      ExpectPair(core.status[i], i == kSuccess && c == 0 ? 1500 : 0);
    }
    ExpectMem(core.device_mem, 0);
    for (const MemCounter& m : core.device_mem_by_category) ExpectMem(m, 0);
    ExpectMem(core.host_mem, c == 0 ? 4456448 : 0);
    ExpectPair(core.other_info.model_load_count, c == 0 ? 1 : 0);
    ExpectPair(core.other_info.reset_req_count, 1);  // the probe's reset
    ExpectPair(core.other_info.reset_fail_count, 0);
    ExpectPair(core.other_info.inference_count, c == 0 ? 1500 : 0);
    ExpectPair(core.other_info.flop_count, c == 0 ? 480000000000000 : 0);
    ExpectPair(core.other_info.nc_time_in_use, c == 0 ? 45000000 : 0);
    ASSERT_TRUE(core.pe_counters.has_value());
    ASSERT_EQ(core.pe_counters->size(), 4u);
    EXPECT_EQ((*core.pe_counters)[0], (PeCounterRow{0, 81234567, 1234567, 918765432}));
    EXPECT_EQ((*core.pe_counters)[3], (PeCounterRow{3, 80567890, 1212345, 919219765}));
  }
  EXPECT_THAT(snap->efas, IsEmpty());
}

TEST_F(FixtureSamplerTest, Trn2DeviceAfterLoadAndItsEfa) {
  Start("trn2.48xlarge-device0.manifest", {"0000:cc:00.0"});
  const std::shared_ptr<const Snapshot> snap = sampler_->Sample(SampleKind::kFull);
  EXPECT_THAT(snap->errors, IsEmpty());
  EXPECT_EQ(snap->lnc, 2);
  ASSERT_EQ(snap->devices.size(), 1u);
  const DeviceSample& d = snap->devices[0];
  EXPECT_EQ(d.serial_number, "19fcda00f5ff6eb9");
  EXPECT_EQ(d.power, (PowerReading{PowerStatus::kNoData, 0, 0, 0, 0}));
  ASSERT_EQ(d.cores.size(), 8u);
  for (const CoreSample& core : d.cores) {
    for (const CounterPair& p : core.status) ExpectPair(p, 0);
    ExpectPair(core.other_info.reset_req_count, 1);
    EXPECT_TRUE(core.pe_counters.has_value());
  }
  ExpectMem(d.cores[0].host_mem, 4194304);
  ExpectMem(d.cores[7].host_mem, 0);

  ASSERT_EQ(snap->efas.size(), 1u);
  const EfaSample& e = snap->efas[0];
  EXPECT_EQ(e.name, "rdmap188s0");
  EXPECT_EQ(e.port_state, 4);
  EXPECT_EQ(e.port_state_name, "ACTIVE");
  EXPECT_EQ(e.phys_state, 5);
  EXPECT_EQ(e.phys_state_name, "LinkUp");
  EXPECT_EQ(e.rate, "200 Gb/sec (4X HDR)");
  EXPECT_THAT(e.rate_gbps, Optional(DoubleEq(200)));
  auto present = [](std::string_view name, const std::optional<uint64_t>& v) {
    EXPECT_TRUE(v.has_value()) << name;
  };
  ForEachCounter(e.port_counters, kEfaPortCounters, present);
  ForEachCounter(e.device_counters, kEfaDeviceCounters, present);
  EXPECT_THAT(e.port_counters.tx_bytes, Optional(1048576u));
  EXPECT_THAT(e.port_counters.rx_bytes, Optional(2097152u));
  EXPECT_THAT(e.device_counters.submitted_cmds, Optional(37u));
}

// A hot sample reads the device state; a change of state re-reads the exit counters.
TEST_F(FixtureSamplerTest, HotSampleSeesAStateChangeAndRereadsExitCounters) {
  Start("trn1.2xlarge.manifest", {"0000:00:1e.0"});
  ASSERT_EQ(sampler_->Sample(SampleKind::kFull)->devices.at(0).state, DeviceState::kReady);
  const fs::path device = root().NeuronDevice(0);
  std::ofstream(device / sysfs::kReset, std::ios::trunc) << "2\n";
  const fs::path success =
      device / sysfs::CoreDir(0) / sysfs::kStatusDir / kStatusCounters[kSuccess].sysfs;
  std::ofstream(success / sysfs::kTotal, std::ios::trunc) << "1501\n";
  const std::shared_ptr<const Snapshot> hot = sampler_->Sample(SampleKind::kHot);
  EXPECT_THAT(hot->errors, IsEmpty());
  const DeviceSample& d = hot->devices.at(0);
  EXPECT_EQ(d.state, DeviceState::kInvalid);
  EXPECT_EQ(d.exit_counters_generation, hot->generation);
  EXPECT_THAT(d.cores[0].status[kSuccess].total, Optional(1501u));
  EXPECT_THAT(d.cores[0].status[kSuccess].present, Optional(1500u));  // carried forward
}

}  // namespace
}  // namespace neuron
