#include "core/sample/sampler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "core/base/unique_fd.h"
#include "core/model/catalog.h"
#include "driver-sim/driver/datastore_writer.h"
#include "driver-sim/driver/sim_tree.h"
#include "tests/support/fake_datastores.h"
#include "tests/support/sanitizer.h"
#include "tests/support/sim_testing.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Positions in the snapshot's set-like arrays, by their typed handles (core/driver/counters.h).
constexpr size_t kSuccess = Index(StatusCounter::success);
constexpr size_t kDriverMemory = Index(HostMemCategory::driver_memory);

// Every field of a counter struct equals `v`.
template <typename Counters>
void ExpectAll(const Counters& counters, std::optional<uint64_t> v) {
  for (auto member : Counters::Members()) EXPECT_EQ(counters.*member, v);
}

Inventory MakeInventory(const InstanceSpec& spec, int lnc) {
  Inventory inv;
  inv.instance_type = std::string(spec.name);
  inv.lnc = lnc;
  for (int d = 0; d < spec.devices; ++d) {
    NeuronDevice dev;
    dev.index = d;
    dev.physical_cores = spec.chip->physical_cores;
    inv.devices.push_back(dev);
  }
  for (const EfaPlacement& e : spec.efas) {
    EfaInterface efa;
    efa.name = e.name;
    inv.efas.push_back(efa);
  }
  return inv;
}

// The live processes of a snapshot as (device, pid) keys.
std::vector<DatastoreKey> Keys(const Snapshot& s) {
  std::vector<DatastoreKey> keys;
  for (const DatastoreRecord& r : s.processes) keys.push_back(r.key());
  return keys;
}

// Datastores come from in-memory fakes (tests/support/fake_datastores.h) unless a test asks for
// the driver back end: these trees have no simulated driver behind their device nodes.
class SamplerTest : public ::testing::Test {
 protected:
  void Start(std::string_view instance, int lnc = 0, SamplerOptions options = {},
             bool driver_datastores = false) {
    root_ = tmp_.path();
    tree_ = ::neuron::testing::MakeSimTree(root_, instance, {.lnc = lnc});
    ASSERT_NE(tree_, nullptr);
    spec_ = tree_->config().spec;
    if (!driver_datastores) options.datastore = ds_->Reader();
    sampler_ = std::make_unique<Sampler>(
        RootPaths(root_), MakeInventory(*spec_, tree_->config().lnc), std::move(options));
  }
  void TearDown() override { sampler_.reset(); }

  fs::path DevDir(int d) const { return RootPaths(root_).NeuronDevice(d); }
  static void Put(const fs::path& file, std::string_view content) {
    std::ofstream(file, std::ios::trunc) << content;
  }
  // A runtime process's datastore on `device`; valid until ds_->Remove(device, pid).
  sim::DatastoreWriter& Writer(int device, int pid) { return ds_->Add(device, pid); }

  ::neuron::testing::TempDir tmp_{"sampler_test"};
  std::shared_ptr<::neuron::testing::FakeDatastores> ds_ =
      ::neuron::testing::FakeDatastores::Make();
  fs::path root_;
  const InstanceSpec* spec_ = nullptr;
  std::unique_ptr<sim::SimTree> tree_;
  std::unique_ptr<Sampler> sampler_;
};

// docs/driver-interface.md#post-load-values and driver-sim/README.md#neuron-devices (post-probe
// values).
TEST_F(SamplerTest, PostProbeValues) {
  Start("trn1.32xlarge");
  auto s = sampler_->Sample(SampleKind::kFull);
  EXPECT_THAT(s->errors, IsEmpty());
  EXPECT_EQ(s->kind, SampleKind::kFull);
  EXPECT_EQ(s->generation, 1u);
  ASSERT_EQ(s->devices.size(), 16u);
  for (const DeviceSample& d : s->devices) {
    SCOPED_TRACE(d.index);
    EXPECT_EQ(d.state, DeviceState::kReady);
    ExpectAll(d.hardware, 0u);
    ASSERT_TRUE(d.power.has_value());
    EXPECT_EQ(d.power->status, PowerStatus::kNoData);
    EXPECT_EQ(d.power->epoch_s, 0);
    EXPECT_EQ(d.power->avg_percent, 0.0);
    ASSERT_TRUE(d.serial_number.has_value());
    EXPECT_EQ(d.serial_number->size(), 16u);  // "%016llx"
    EXPECT_EQ(d.host_mem[kDriverMemory].total, 4194304u);
    EXPECT_EQ(d.host_mem[kDriverMemory].peak, 4194304u);
    EXPECT_EQ(d.host_mem[Index(HostMemCategory::dma_buffers)].total, 0u);
    ASSERT_EQ(d.cores.size(), 2u);
    for (const CoreSample& c : d.cores) {
      EXPECT_EQ(c.other_info.reset_req_count.total, 1u);
      EXPECT_EQ(c.other_info.reset_req_count.present, 1u);
      EXPECT_EQ(c.other_info.nc_time_in_use.total, 0u);
      EXPECT_EQ(c.status[kSuccess].total, 0u);
      EXPECT_EQ(c.device_mem.total, 0u);
      EXPECT_EQ(c.device_mem_by_category[Index(DeviceMemCategory::model_code)].peak, 0u);
      ASSERT_TRUE(c.pe_counters.has_value());
      ASSERT_EQ(c.pe_counters->size(), 4u);
      EXPECT_EQ((*c.pe_counters)[3].row_group, 3);
    }
    EXPECT_EQ(d.cores[0].host_mem.total, 4194304u);
    EXPECT_EQ(d.cores[1].host_mem.total, 0u);
  }
  ASSERT_EQ(s->efas.size(), 8u);
  for (const EfaSample& e : s->efas) {
    EXPECT_EQ(e.port_state, 4);
    EXPECT_EQ(e.port_state_name, "ACTIVE");
    EXPECT_EQ(e.phys_state, 5);
    EXPECT_EQ(e.phys_state_name, "LinkUp");
    EXPECT_EQ(e.rate, "100 Gb/sec (4X EDR)");
    EXPECT_EQ(e.rate_gbps, 100.0);
    ExpectAll(e.port_counters, 0u);
    ExpectAll(e.device_counters, 0u);
  }
  EXPECT_THAT(s->processes, IsEmpty());
}

TEST_F(SamplerTest, FirstSampleIsFullWhateverTheKind) {
  Start("trn1.2xlarge");
  auto s = sampler_->Sample(SampleKind::kHot);
  EXPECT_EQ(s->kind, SampleKind::kFull);
  ASSERT_EQ(s->devices.size(), 1u);
  EXPECT_TRUE(s->devices[0].power.has_value());
}

TEST_F(SamplerTest, HotSampleSeesEccStateAndMemoryTotalsAndCarriesTheRest) {
  Start("inf2.24xlarge");
  auto full = sampler_->Sample(SampleKind::kFull);
  ASSERT_TRUE(tree_->AddHardwareErrors(3, "mem_ecc_uncorrected", 2).ok());
  ASSERT_TRUE(tree_->SetDeviceState(4, DeviceState::kInvalid).ok());
  ASSERT_TRUE(tree_
                  ->ApplyCounter(tree_->CoreDir(5, 1) / "stats/memory_usage/device_mem",
                                 sim::CounterOp::kInc, 65536)
                  .ok());
  ASSERT_TRUE(
      tree_->ApplyCounter(tree_->HostMemDir(5, "tensors"), sim::CounterOp::kInc, 4096).ok());
  ASSERT_TRUE(tree_->WritePower(0, "POWER_STATUS_VALID", 1735689600, 1234, 5678, 3456).ok());

  auto hot = sampler_->Sample(SampleKind::kHot);
  EXPECT_EQ(hot->kind, SampleKind::kHot);
  EXPECT_THAT(hot->errors, IsEmpty());
  EXPECT_EQ(hot->FindDevice(3)->hardware.mem_ecc_uncorrected, 2u);
  EXPECT_EQ(hot->FindDevice(4)->state, DeviceState::kInvalid);
  EXPECT_EQ(hot->FindDevice(5)->cores[1].device_mem.total, 65536u);
  EXPECT_EQ(hot->FindDevice(5)->host_mem[Index(HostMemCategory::tensors)].total, 4096u);
  // Not hot: peak and power wait for the full sweep, and say which sweep read them.
  EXPECT_EQ(hot->FindDevice(5)->cores[1].device_mem.peak, 0u);
  EXPECT_EQ(hot->FindDevice(0)->power->status, PowerStatus::kNoData);
  EXPECT_EQ(hot->FindDevice(0)->full_generation, full->generation);

  auto full2 = sampler_->Sample(SampleKind::kFull);
  EXPECT_EQ(full2->FindDevice(5)->cores[1].device_mem.peak, 65536u);
  const PowerReading& p = *full2->FindDevice(0)->power;
  EXPECT_EQ(p.status, PowerStatus::kValid);
  EXPECT_EQ(p.epoch_s, 1735689600);
  EXPECT_DOUBLE_EQ(p.min_percent, 12.34);
  EXPECT_DOUBLE_EQ(p.max_percent, 56.78);
  EXPECT_DOUBLE_EQ(p.avg_percent, 34.56);
  EXPECT_EQ(full2->FindDevice(0)->full_generation, full2->generation);
}

TEST_F(SamplerTest, StatusCountersAfterProcessExitReachTheNextHotSample) {
  Start("inf2.24xlarge");
  sim::DatastoreWriter& w = Writer(1, 4242);
  ASSERT_TRUE(w.SetCoreCounter(1, nds::kInferCompleted, 7).ok());
  ASSERT_TRUE(w.SetCoreCounter(1, nds::kTimeInUse, 5000000).ok());
  ASSERT_TRUE(w.SetCoreCounter(1, nds::kMacCount, 100).ok());
  sampler_->Sample(SampleKind::kFull);

  auto live = sampler_->Sample(SampleKind::kHot);
  ASSERT_EQ(live->processes.size(), 1u);
  EXPECT_EQ(live->processes[0].pid, 4242);
  std::vector<LogicalCoreTotals> cores = LogicalCores(*live, *live->FindDevice(1));
  ASSERT_EQ(cores.size(), 2u);
  EXPECT_EQ(cores[1].status[kSuccess], 7u);
  EXPECT_EQ(cores[1].busy_us, 5000000u);
  EXPECT_EQ(cores[1].flops, 200u);
  EXPECT_EQ(cores[0].busy_us, 0u);

  // Exit as the driver does it: fold into sysfs first, then release the entry
  // (docs/driver-interface.md#live-vs-exit).
  ASSERT_TRUE(tree_->ApplyCounter(tree_->StatusDir(1, 1, "success"), sim::CounterOp::kInc, 7).ok());
  ASSERT_TRUE(
      tree_
          ->ApplyCounter(tree_->OtherInfoDir(1, 1, "nc_time_in_use"), sim::CounterOp::kInc, 5000000)
          .ok());
  ASSERT_TRUE(
      tree_->ApplyCounter(tree_->OtherInfoDir(1, 1, "flop_count"), sim::CounterOp::kInc, 200).ok());
  ds_->Remove(1, 4242);

  auto after = sampler_->Sample(SampleKind::kHot);
  EXPECT_EQ(after->kind, SampleKind::kHot);
  EXPECT_THAT(after->processes, IsEmpty());
  const DeviceSample& d = *after->FindDevice(1);
  EXPECT_EQ(d.cores[1].status[kSuccess].total, 7u);
  EXPECT_EQ(d.cores[1].status[kSuccess].present, 0u) << "present is not hot: carried";
  EXPECT_EQ(d.exit_counters_generation, after->generation);
  cores = LogicalCores(*after, d);
  EXPECT_EQ(cores[1].status[kSuccess], 7u) << "counted once, not in sysfs and datastore both";
  EXPECT_EQ(cores[1].busy_us, 5000000u);
  EXPECT_EQ(cores[1].flops, 200u);
  // Devices that lost no entry keep their carried exit counters.
  EXPECT_LT(after->FindDevice(2)->exit_counters_generation, after->generation);
}

TEST_F(SamplerTest, HotSampleLeavesStatusCountersToTheFullSweepWhileEntriesStay) {
  Start("trn1.2xlarge");
  sampler_->Sample(SampleKind::kFull);
  // A sysfs change with no datastore entry lost (not something the driver does): the hot
  // sample does not read status files, the full sweep does.
  ASSERT_TRUE(tree_->ApplyCounter(tree_->StatusDir(0, 0, "timeout"), sim::CounterOp::kInc, 3).ok());
  EXPECT_EQ(sampler_->Sample(SampleKind::kHot)->devices[0].cores[0].status[2].total, 0u);
  EXPECT_EQ(sampler_->Sample(SampleKind::kFull)->devices[0].cores[0].status[2].total, 3u);
}

TEST_F(SamplerTest, ResetCountersFollowAStateChange) {
  Start("trn1.2xlarge");
  sampler_->Sample(SampleKind::kFull);
  ASSERT_TRUE(tree_->SetDeviceState(0, DeviceState::kReset).ok());
  ASSERT_TRUE(
      tree_->ApplyCounter(tree_->OtherInfoDir(0, 0, "reset_req_count"), sim::CounterOp::kInc, 1)
          .ok());
  auto s = sampler_->Sample(SampleKind::kHot);
  EXPECT_EQ(s->devices[0].state, DeviceState::kReset);
  EXPECT_EQ(s->devices[0].cores[0].other_info.reset_req_count.total, 2u);
}

TEST_F(SamplerTest, UnpluggedDeviceIsAbsentAndReturnsReadAfresh) {
  Start("inf2.24xlarge");
  sampler_->Sample(SampleKind::kFull);
  ASSERT_TRUE(tree_->AddHardwareErrors(5, "sram_ecc_uncorrected", 9).ok());
  EXPECT_EQ(sampler_->Sample(SampleKind::kHot)->FindDevice(5)->hardware.sram_ecc_uncorrected, 9u);
  ASSERT_TRUE(tree_->RemoveDevice(5).ok());
  for (SampleKind kind : {SampleKind::kHot, SampleKind::kFull}) {
    auto s = sampler_->Sample(kind);
    EXPECT_EQ(s->FindDevice(5), nullptr);
    EXPECT_EQ(s->devices.size(), 5u);
    EXPECT_THAT(s->errors, IsEmpty());
  }
  // Replug: a new directory (the old handles are stale); post-probe values, read in full.
  ASSERT_TRUE(tree_->AddDevice(5).ok());
  auto s = sampler_->Sample(SampleKind::kHot);
  ASSERT_NE(s->FindDevice(5), nullptr);
  EXPECT_EQ(s->FindDevice(5)->hardware.sram_ecc_uncorrected, 0u);
  EXPECT_EQ(s->FindDevice(5)->full_generation, s->generation);
  EXPECT_TRUE(s->FindDevice(5)->power.has_value());
  EXPECT_THAT(s->errors, IsEmpty());
}

TEST_F(SamplerTest, ReplugBetweenTwoSamplesIsReadThroughTheNewDirectory) {
  Start("trn1.2xlarge");
  ASSERT_TRUE(tree_->AddHardwareErrors(0, "mem_ecc_uncorrected", 4).ok());
  EXPECT_EQ(sampler_->Sample(SampleKind::kFull)->devices[0].hardware.mem_ecc_uncorrected, 4u);
  ASSERT_TRUE(tree_->RemoveDevice(0).ok());
  ASSERT_TRUE(tree_->AddDevice(0).ok());
  auto s = sampler_->Sample(SampleKind::kHot);
  ASSERT_EQ(s->devices.size(), 1u);
  EXPECT_EQ(s->devices[0].hardware.mem_ecc_uncorrected, 0u);
}

TEST_F(SamplerTest, EfaCountersAndEfaDown) {
  Start("trn1.32xlarge");
  const std::string name(spec_->efas[2].name);
  ASSERT_TRUE(tree_->AddEfaCounter(name, "tx_bytes", 123456).ok());
  auto s = sampler_->Sample(SampleKind::kFull);
  ASSERT_NE(s->FindEfa(name), nullptr);
  EXPECT_EQ(s->FindEfa(name)->port_counters.tx_bytes, 123456u);
  EXPECT_EQ(s->FindEfa(name)->port_counters.rx_bytes, 0u);
  ASSERT_TRUE(tree_->RemoveEfa(name).ok());
  s = sampler_->Sample(SampleKind::kFull);
  EXPECT_EQ(s->FindEfa(name), nullptr);
  EXPECT_EQ(s->efas.size(), 7u);
  EXPECT_THAT(s->errors, IsEmpty());
  ASSERT_TRUE(tree_->AddEfa(name).ok());
  s = sampler_->Sample(SampleKind::kFull);
  ASSERT_NE(s->FindEfa(name), nullptr);
  EXPECT_EQ(s->FindEfa(name)->port_counters.tx_bytes, 0u);

  // A counter file an older kernel lacks: absent, not 0, and no error.
  const std::string other(spec_->efas[0].name);
  fs::remove(RootPaths(root_).InfinibandClassDir() / other / "ports/1/hw_counters/rdma_write_wrs");
  s = sampler_->Sample(SampleKind::kFull);
  EXPECT_FALSE(s->FindEfa(other)->port_counters.rdma_write_wrs.has_value());
  EXPECT_EQ(s->FindEfa(other)->port_counters.tx_bytes, 0u);
  EXPECT_THAT(s->errors, IsEmpty());
}

TEST_F(SamplerTest, BadFilesAreAbsentWithErrorsNamingThemAndNothingElseIsLost) {
  Start("trn1.2xlarge");
  const fs::path d = DevDir(0);
  const fs::path c0 = d / "neuron_core0/stats";
  Put(d / "reset", "");                                                 // empty
  Put(c0 / "status/success/total", "garbage\n");                        // garbage
  Put(d / "stats/hardware/mem_ecc_uncorrected", "-1\n");                // negative
  Put(c0 / "memory_usage/device_mem/total", "18446744073709551616\n");  // > u64
  Put(c0 / "other_info/flop_count/present", std::string(600, '7'));     // too large
  Put(d / "stats/power/utilization", "POWER_STATUS_VALID,12,1.5,2.00,3.00\n");
  Put(c0 / "tensor_engine/pe_cntrs", "nothing like the table\n");
  fs::remove(c0 / "status/timeout/total");  // missing file
  fs::remove_all(d / "neuron_core1");       // missing dir
  fs::remove(d / "info/serial_number");

  auto s = sampler_->Sample(SampleKind::kFull);
  ASSERT_EQ(s->devices.size(), 1u);
  const DeviceSample& dev = s->devices[0];
  EXPECT_FALSE(dev.state.has_value());
  EXPECT_FALSE(dev.hardware.mem_ecc_uncorrected.has_value());
  EXPECT_EQ(dev.hardware.sram_ecc_uncorrected, 0u);
  EXPECT_FALSE(dev.power.has_value());
  EXPECT_FALSE(dev.serial_number.has_value());
  EXPECT_FALSE(dev.cores[0].status[kSuccess].total.has_value());
  EXPECT_EQ(dev.cores[0].status[kSuccess].present, 0u);
  EXPECT_FALSE(dev.cores[0].status[2].total.has_value());  // timeout: missing
  EXPECT_FALSE(dev.cores[0].device_mem.total.has_value());
  EXPECT_FALSE(dev.cores[0].other_info.flop_count.present.has_value());
  EXPECT_EQ(dev.cores[0].other_info.flop_count.total, 0u);
  EXPECT_FALSE(dev.cores[0].pe_counters.has_value());
  EXPECT_EQ(dev.cores[0].host_mem.total, 4194304u);
  for (const CounterPair& p : dev.cores[1].status) EXPECT_FALSE(p.total.has_value());
  EXPECT_FALSE(dev.cores[1].pe_counters.has_value());

  const std::string dir = d.string();
  EXPECT_EQ(s->errors.size(), 7u) << ::testing::PrintToString(s->errors);
  EXPECT_THAT(s->errors, Contains(HasSubstr(dir + "/reset")));
  EXPECT_THAT(s->errors, Contains(HasSubstr(dir + "/neuron_core0/stats/status/success/total")));
  EXPECT_THAT(s->errors, Contains(HasSubstr(dir + "/stats/hardware/mem_ecc_uncorrected")));
  EXPECT_THAT(s->errors,
              Contains(HasSubstr(dir + "/neuron_core0/stats/memory_usage/device_mem/total")));
  EXPECT_THAT(s->errors,
              Contains(HasSubstr(dir + "/neuron_core0/stats/other_info/flop_count/present")));
  EXPECT_THAT(s->errors, Contains(HasSubstr(dir + "/stats/power/utilization")));
  EXPECT_THAT(s->errors, Contains(HasSubstr(dir + "/neuron_core0/stats/tensor_engine/pe_cntrs")));
  // Logical figures built on an absent file are absent too.
  EXPECT_FALSE(LogicalCores(*s, dev)[0].status[kSuccess].has_value());
  EXPECT_FALSE(LogicalCores(*s, dev)[1].busy_us.has_value());
}

TEST_F(SamplerTest, OutOfDescriptorsFallsBackToFullPathsAndLosesNothing) {
  if (testing::kAsan) {
    // UBSan's vptr check (in the asan preset) probes memory through a pipe; with the descriptor
    // table exhausted on purpose the probe fails and it reports a false "invalid vptr". Dev and
    // release run this.
    GTEST_SKIP() << "needs a descriptor table the sanitizer runtime does not share";
  }
  SamplerOptions options;
  options.threads = 1;
  Start("trn1.2xlarge", 0, std::move(options));
  // Use up every descriptor but two: the Sampler's directory handles cannot all be opened.
  std::vector<UniqueFd> held;
  for (;;) {
    UniqueFd fd(::dup(0));
    if (!fd) break;
    held.push_back(std::move(fd));
  }
  ASSERT_GE(held.size(), 2u);
  held.pop_back();  // two descriptors free
  held.pop_back();
  auto s = sampler_->Sample(SampleKind::kFull);
  held.clear();

  ASSERT_EQ(s->devices.size(), 1u);
  for (const CoreSample& c : s->devices[0].cores) {
    for (const CounterPair& p : c.status) EXPECT_EQ(p.total, 0u);
    EXPECT_EQ(c.other_info.reset_req_count.total, 1u);
  }
  for (const std::string& e : s->errors) {
    EXPECT_THAT(e, ::testing::Not(HasSubstr("/sys/"))) << "no sysfs file may be lost";
  }
}

TEST_F(SamplerTest, MissingClassTreeGivesAnEmptySnapshot) {
  Start("trn1.2xlarge");
  fs::remove_all(root_ / "sys");
  auto s = sampler_->Sample(SampleKind::kFull);
  EXPECT_THAT(s->devices, IsEmpty());
  EXPECT_THAT(s->efas, IsEmpty());
  EXPECT_THAT(s->errors, IsEmpty());
}

// The runtimes' records come from the records reader (libnrt in production) for the processes
// the snapshot holds: one without records is unknown (no entry), one whose datastore went away
// is dropped, and the reader's state passes through.
TEST_F(SamplerTest, RuntimeRecordsOfTheSampledProcessesOnly) {
  SamplerOptions options;
  options.records = ds_->Records();
  Start("trn1.2xlarge", 0, std::move(options));
  ASSERT_TRUE(Writer(0, 100).SetCoreCounter(0, nds::kInferCompleted, 5).ok());
  ASSERT_TRUE(Writer(0, 200).SetCoreCounter(1, nds::kInferCompleted, 9).ok());
  ds_->SetRecords(0, 100).process.long_tag = "tagged";
  ds_->SetRecords(0, 300).process.long_tag = "gone";  // no datastore any more
  ds_->SetRecordsState({true, false, "neuron0 pid 200: nds_read_process_info: Protocol error"});

  auto s = sampler_->Sample(SampleKind::kFull);
  ASSERT_THAT(Keys(*s), ElementsAre(DatastoreKey{0, 100}, DatastoreKey{0, 200}));
  ASSERT_EQ(s->runtime_records.records.size(), 1u);
  EXPECT_EQ(RuntimeTag(s->runtime_records.Find({0, 100}), 100), "tagged");
  EXPECT_EQ(s->runtime_records.Find({0, 200}), nullptr);
  EXPECT_EQ(RuntimeTag(s->runtime_records.Find({0, 200}), 200), "200");
  EXPECT_FALSE(s->runtime_records.state.up);
  EXPECT_THAT(s->runtime_records.state.reason, HasSubstr("Protocol error"));
  EXPECT_EQ(s->processes[1].Core(1, nds::kInferCompleted), 9u) << "counters are unaffected";
}

// Without a records reader the records are not known at all (no source to report).
TEST_F(SamplerTest, NoRecordsReaderNoRecordsState) {
  Start("trn1.2xlarge");
  ASSERT_TRUE(Writer(0, 100).SetCoreCounter(0, nds::kInferCompleted, 5).ok());
  ds_->SetRecords(0, 100).process.long_tag = "tagged";
  auto s = sampler_->Sample(SampleKind::kFull);
  EXPECT_FALSE(s->runtime_records.state.known);
  EXPECT_THAT(s->runtime_records.records, IsEmpty());
}

// Processes come and go between samples (the datastore back end lists them afresh each time);
// one that went leaves no record and no error.
TEST_F(SamplerTest, ProcessesAppearAndDisappearBetweenSamples) {
  Start("trn1.32xlarge");
  auto s = sampler_->Sample(SampleKind::kFull);
  EXPECT_THAT(s->processes, IsEmpty());
  ASSERT_TRUE(Writer(3, 300).SetCoreCounter(0, nds::kTimeInUse, 30).ok());
  ASSERT_TRUE(Writer(1, 100).SetCoreCounter(1, nds::kTimeInUse, 10).ok());
  ASSERT_TRUE(Writer(1, 50).SetCoreCounter(0, nds::kTimeInUse, 5).ok());
  s = sampler_->Sample(SampleKind::kHot);
  EXPECT_THAT(Keys(*s),
              ElementsAre(DatastoreKey{1, 50}, DatastoreKey{1, 100}, DatastoreKey{3, 300}))
      << "ascending (device, pid)";
  EXPECT_EQ(s->processes[1].Core(1, nds::kTimeInUse), 10u);
  ds_->Remove(1, 100);
  s = sampler_->Sample(SampleKind::kHot);
  EXPECT_THAT(Keys(*s), ElementsAre(DatastoreKey{1, 50}, DatastoreKey{3, 300}));
  EXPECT_THAT(s->errors, IsEmpty());
}

// docs/architecture.md#unknown-is-not-zero: each snapshot says whether live datastores could be
// read at all, so an empty process list is not taken for an idle node.
TEST_F(SamplerTest, SnapshotCarriesTheDatastoreSourceState) {
  Start("trn1.2xlarge");
  auto s = sampler_->Sample(SampleKind::kFull);
  EXPECT_TRUE(s->datastore_source.known);
  EXPECT_TRUE(s->datastore_source.up);
  ds_->SetState({.known = true, .up = false, .reason = "/dev/neuron0: permission denied"});
  s = sampler_->Sample(SampleKind::kHot);
  EXPECT_TRUE(s->datastore_source.known);
  EXPECT_FALSE(s->datastore_source.up);
  EXPECT_EQ(s->datastore_source.reason, "/dev/neuron0: permission denied");
}

// The default back end is the driver's device ABI. Without a driver behind the device nodes (a
// tree without `neuron-sim up`) the snapshot says why there are no processes, and a sample is
// not an error.
TEST_F(SamplerTest, WithoutADriverTheDatastoreSourceIsDownWithTheReason) {
  Start("trn1.2xlarge", 0, {}, /*driver_datastores=*/true);
  std::shared_ptr<const Snapshot> s;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  do {
    s = sampler_->Sample(SampleKind::kHot);
    if (!s->datastore_source.known) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  } while (!s->datastore_source.known && std::chrono::steady_clock::now() < deadline);
  ASSERT_TRUE(s->datastore_source.known) << "the first probe never finished";
  EXPECT_FALSE(s->datastore_source.up);
  EXPECT_THAT(s->datastore_source.reason, HasSubstr((root_ / "dev/neuron0").string()));
  EXPECT_THAT(s->datastore_source.reason, HasSubstr("no Neuron driver answers its ioctls"));
  EXPECT_THAT(s->processes, IsEmpty());
  EXPECT_THAT(s->errors, IsEmpty());
}

TEST_F(SamplerTest, Lnc2LogicalCoreIsTheMeanOfBusyAndTheSumOfCounts) {
  Start("trn2.48xlarge", 2);
  // Logical core 1 = physical 2, 3, in sysfs and in the datastore's counter sets alike (sets are
  // per physical core: driver-sim/README.md). docs/metrics.md#labels-and-liveness: busy time is
  // the pair's mean, counts their sum.
  ASSERT_TRUE(
      tree_->ApplyCounter(tree_->OtherInfoDir(7, 2, "nc_time_in_use"), sim::CounterOp::kInc, 300)
          .ok());
  ASSERT_TRUE(
      tree_->ApplyCounter(tree_->OtherInfoDir(7, 3, "nc_time_in_use"), sim::CounterOp::kInc, 100)
          .ok());
  ASSERT_TRUE(tree_->ApplyCounter(tree_->StatusDir(7, 3, "success"), sim::CounterOp::kInc, 2).ok());
  sim::DatastoreWriter& w = Writer(7, 555);
  ASSERT_TRUE(w.SetCoreCounter(2, nds::kTimeInUse, 40).ok());
  ASSERT_TRUE(w.SetCoreCounter(3, nds::kTimeInUse, 40).ok());
  ASSERT_TRUE(w.SetCoreCounter(2, nds::kInferCompleted, 5).ok());
  ASSERT_TRUE(w.SetCoreCounter(1, nds::kTimeInUse, 60).ok());  // physical 1: logical core 0
  auto s = sampler_->Sample(SampleKind::kFull);
  EXPECT_EQ(s->lnc, 2);
  const DeviceSample& d = *s->FindDevice(7);
  ASSERT_EQ(d.cores.size(), 8u);
  std::vector<LogicalCoreTotals> cores = LogicalCores(*s, d);
  ASSERT_EQ(cores.size(), 4u);
  EXPECT_EQ(cores[1].busy_us, 240u);         // (300 + 100 + live 40 + 40) / 2
  EXPECT_EQ(cores[1].status[kSuccess], 7u);  // physical 2 + 3, sysfs and live
  EXPECT_EQ(cores[1].reset_requests, 2u);    // post-probe 1 on each physical core
  EXPECT_EQ(cores[0].busy_us, 30u);          // (0 + live 60) / 2
  EXPECT_EQ(cores[2].busy_us, 0u);
}

TEST_F(SamplerTest, UtilizationBetweenTwoSnapshots) {
  Start("trn1.2xlarge");
  sim::DatastoreWriter& w = Writer(0, 321);
  auto a = sampler_->Sample(SampleKind::kFull);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // Core 1 busy far longer than the window (clamped to 1); core 0 idle.
  ASSERT_TRUE(w.AddCoreCounter(1, nds::kTimeInUse, 3600000000).ok());
  auto b = sampler_->Sample(SampleKind::kHot);
  EXPECT_EQ(Utilization(*a, *b, 0, 1), 1.0);
  EXPECT_EQ(Utilization(*a, *b, 0, 0), 0.0);
  EXPECT_FALSE(Utilization(*a, *b, 1, 0).has_value()) << "no such device";
  EXPECT_FALSE(Utilization(*b, *a, 0, 1).has_value()) << "time must advance";
}

TEST_F(SamplerTest, OneAndTwoThreadsReadTheSame) {
  SamplerOptions one;
  one.threads = 1;
  Start("inf2.24xlarge", 0, std::move(one));
  ASSERT_TRUE(tree_->AddHardwareErrors(1, "mem_ecc_uncorrected", 1).ok());
  ASSERT_TRUE(
      tree_->ApplyCounter(tree_->StatusDir(4, 1, "hw_error"), sim::CounterOp::kInc, 4).ok());
  auto single = sampler_->Sample(SampleKind::kFull);
  SamplerOptions two;
  two.threads = 2;
  two.min_files_for_threads = 0;
  two.datastore = ds_->Reader();
  Sampler parallel(RootPaths(root_), MakeInventory(*spec_, 1), std::move(two));
  auto both = parallel.Sample(SampleKind::kFull);
  ASSERT_EQ(single->devices.size(), both->devices.size());
  for (size_t i = 0; i < single->devices.size(); ++i) {
    const DeviceSample& x = single->devices[i];
    const DeviceSample& y = both->devices[i];
    EXPECT_EQ(x.index, y.index);
    EXPECT_EQ(x.hardware, y.hardware);
    EXPECT_EQ(x.host_mem, y.host_mem);
    for (size_t c = 0; c < x.cores.size(); ++c) {
      EXPECT_EQ(x.cores[c].status, y.cores[c].status);
      EXPECT_EQ(x.cores[c].other_info, y.cores[c].other_info);
      EXPECT_EQ(x.cores[c].device_mem_by_category, y.cores[c].device_mem_by_category);
    }
  }
  EXPECT_EQ(both->FindDevice(4)->cores[1].status[4].total, 4u);
  EXPECT_EQ(both->efas.size(), single->efas.size());
}

TEST_F(SamplerTest, SetInventoryDropsAndAddsDevices) {
  Start("inf2.24xlarge");
  sampler_->Sample(SampleKind::kFull);
  Inventory smaller = MakeInventory(*spec_, 1);
  smaller.devices.resize(2);
  sampler_->SetInventory(smaller);
  auto s = sampler_->Sample(SampleKind::kHot);
  EXPECT_EQ(s->devices.size(), 2u);
  sampler_->SetInventory(MakeInventory(*spec_, 1));
  s = sampler_->Sample(SampleKind::kHot);
  ASSERT_EQ(s->devices.size(), 6u);
  EXPECT_EQ(s->FindDevice(4)->full_generation, s->generation) << "carried data was dropped";
}

}  // namespace
}  // namespace neuron
