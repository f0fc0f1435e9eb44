// Faults as a runtime process sees them (docs/architecture.md#faults,
// docs/runtime.md#hardware-errors, #faults): each injected fault's status and datastore counters,
// FAULTED cores until a device reset, device states, a reset aborting an execution in flight, and,
// with a real node daemon, the NEURON_HW_ERR= kmsg record and the one-shot clear.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <vector>

#include "driver-sim/driver/ctl.h"
#include "driver-sim/driver/daemon.h"
#include "driver-sim/driver/sim_paths.h"
#include "driver-sim/runtime/clock.h"
#include "driver-sim/runtime/program.h"
#include "tests/driver-sim/runtime/runtime_test_util.h"

namespace neuron::nrt::testing {
namespace {

using ::testing::HasSubstr;

sim::PendingFault Fault(uint64_t id, sim::FaultKind kind, int device, std::optional<int> core) {
  return {id, kind, device, core, std::nullopt, 1735689600000 + static_cast<int64_t>(id)};
}

class FaultsTest : public SimNodeTest {
 protected:
  void SetUp() override {
    SimNodeTest::SetUp();
    MakeNode("trn1.2xlarge");
    SetClockForTesting(std::make_shared<ManualClock>(1'000'000'000));
    ::setenv("NEURON_RT_EXEC_TIMEOUT", "2", 1);
    ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
    model_ = Load(Neff(Ops(R"({"op": "vector", "flops": 1e8})")), 0);
    ASSERT_NE(model_, nullptr);
  }
  NRT_STATUS Exec() { return nrt_execute(model_, nullptr, nullptr); }
  nrt_model_t* model_ = nullptr;
};

struct FaultCase {
  sim::FaultKind kind;
  NRT_STATUS status;
  std::vector<int> counters;  // NC indices that each rise by one
  bool faults_core;           // later executions get 101 until a reset
};

class FaultKindsTest : public FaultsTest, public ::testing::WithParamInterface<FaultCase> {};

TEST_P(FaultKindsTest, ExecutionFailsWithTheMappedStatusAndCounters) {
  const FaultCase& c = GetParam();
  StderrCapture quiet(dir_.path() / "err.txt");
  ASSERT_EQ(Exec(), NRT_SUCCESS);
  WriteFaults({Fault(7, c.kind, 0, 0)});
  EXPECT_EQ(Exec(), c.status);
  for (int index : c.counters) EXPECT_EQ(DsCounter(0, 0, index), 1u) << "NC index " << index;
  EXPECT_EQ(DsCounter(0, 0, nds::kInferCompleted), 1u);  // only the first
  // One-shot per process: the fault is still pending (no daemon clears it), yet not repeated.
  const NRT_STATUS next = Exec();
  if (c.faults_core) {
    EXPECT_EQ(next, NRT_EXEC_UNIT_UNRECOVERABLE);
    // Until the device is reset: RESET, then READY again.
    SetDeviceState(0, 0);
    RefreshForTesting();
    EXPECT_EQ(Exec(), NRT_HW_ERROR);
    SetDeviceState(0, 1);
    RefreshForTesting();
    EXPECT_EQ(Exec(), NRT_SUCCESS);
  } else {
    EXPECT_EQ(next, NRT_SUCCESS);
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllKinds, FaultKindsTest,
    ::testing::Values(FaultCase{sim::FaultKind::kHbmUe,
                                NRT_EXEC_HW_ERR_HBM_UE,
                                {nds::kHwErrHbmUe, nds::kErrHw},
                                true},
                      FaultCase{sim::FaultKind::kSramUe,
                                NRT_EXEC_HW_ERR_NC_UE,
                                {nds::kHwErrNcUe, nds::kInferCompletedWithErr, nds::kErrHw},
                                true},
                      FaultCase{sim::FaultKind::kDmaAbort,
                                NRT_EXEC_HW_ERR_DMA_ABORT,
                                {nds::kHwErrDmaAbort, nds::kErrHw},
                                true},
                      FaultCase{sim::FaultKind::kNan,
                                NRT_EXEC_COMPLETED_WITH_NUM_ERR,
                                {nds::kInferCompletedWithNumErr, nds::kErrNumerical},
                                false},
                      FaultCase{sim::FaultKind::kHang, NRT_TIMEOUT, {nds::kInferTimedOut}, false}),
    [](const ::testing::TestParamInfo<FaultCase>& info) {
      std::string name(sim::FaultKindName(info.param.kind));
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

TEST_F(FaultsTest, HangIsBusyUntilTheTimeout) {
  StderrCapture quiet(dir_.path() / "err.txt");
  WriteFaults({Fault(1, sim::FaultKind::kHang, 0, std::nullopt)});
  EXPECT_EQ(Exec(), NRT_TIMEOUT);
  EXPECT_EQ(DsCounter(0, 0, nds::kTimeInUse), 2'000'000u);  // NEURON_RT_EXEC_TIMEOUT=2
}

TEST_F(FaultsTest, FaultForAnotherCoreLeavesThisOneAlone) {
  WriteFaults({Fault(3, sim::FaultKind::kHbmUe, 0, 1)});
  EXPECT_EQ(Exec(), NRT_SUCCESS);  // the model runs on core 0
  nrt_model_t* other = Load(Neff(Ops(R"({"op": "vector", "flops": 1e8})")), 1);
  ASSERT_NE(other, nullptr);
  StderrCapture quiet(dir_.path() / "err.txt");
  EXPECT_EQ(nrt_execute(other, nullptr, nullptr), NRT_EXEC_HW_ERR_HBM_UE);
  EXPECT_EQ(DsCounter(0, 1, nds::kHwErrHbmUe), 1u);
  EXPECT_EQ(DsCounter(0, 0, nds::kHwErrHbmUe), 0u);
}

TEST_F(FaultsTest, DeviceNotReadyFailsExecutionsWithHwError) {
  StderrCapture quiet(dir_.path() / "err.txt");
  SetDeviceState(0, 2);  // INVALID (a failed reset)
  RefreshForTesting();
  EXPECT_EQ(Exec(), NRT_HW_ERROR);
  SetDeviceState(0, 1);
  RefreshForTesting();
  // Read once READY again: the driver refuses opens of an INVALID device, a monitor's too.
  EXPECT_EQ(DsCounter(0, 0, nds::kErrHw), 1u);
  EXPECT_EQ(Exec(), NRT_SUCCESS);
}

TEST_F(FaultsTest, UnpluggedDeviceFailsExecutionsWithHwError) {
  StderrCapture quiet(dir_.path() / "err.txt");
  ASSERT_TRUE(driver_->Unplug(0).ok());  // as `ctl unplug`: the tree and the driver
  RefreshForTesting();
  EXPECT_EQ(Exec(), NRT_HW_ERROR);
}

// The wall clock, and how many executions are asleep in it right now until a point at least a
// second ahead: the observable sign that an execution passed its checks and is running.
class WatchedClock final : public Clock {
 public:
  int64_t NowNs() const override { return steady_.NowNs(); }
  bool SleepUntil(int64_t t_ns, Interrupt& interrupt) override {
    const bool long_sleep = t_ns - NowNs() >= 1'000'000'000;
    if (long_sleep) long_sleepers_.fetch_add(1);
    const bool reached = steady_.SleepUntil(t_ns, interrupt);
    if (long_sleep) long_sleepers_.fetch_sub(1);
    return reached;
  }
  int long_sleepers() const { return long_sleepers_.load(); }

 private:
  SteadyClock steady_;
  std::atomic<int> long_sleepers_{0};
};

// A reset while an execution runs aborts it (docs/architecture.md#faults), on the wall clock.
class ResetInFlightTest : public SimNodeTest {};

TEST_F(ResetInFlightTest, ResetAbortsTheRunningExecution) {
  MakeNode("trn1.2xlarge");
  auto clock = std::make_shared<WatchedClock>();
  SetClockForTesting(clock);  // SimNodeTest::TearDown restores the default
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  nrt_model_t* m = Load(Neff(Ops(R"({"op": "dma", "bytes": 2e12})")), 0);  // ~5.7 s
  ASSERT_NE(m, nullptr);
  StderrCapture quiet(dir_.path() / "err.txt");
  const auto t0 = std::chrono::steady_clock::now();
  auto result = std::async(std::launch::async, [m] { return nrt_execute(m, nullptr, nullptr); });
  // In flight: past the device-state check and asleep until its ~5.7 s end. A reset before
  // this point would be refused up front with the same status and no busy time.
  ASSERT_TRUE(WaitUntil([&] { return clock->long_sleepers() == 1; }, 30s))
      << "the execution never started";
  SetDeviceState(0, 0);  // RESET; the runtime's watch notices within its poll period
  EXPECT_EQ(result.get(), NRT_HW_ERROR);  // "in reset" (docs/runtime.md#status-codes)
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(elapsed, 5s);
  EXPECT_EQ(clock->long_sleepers(), 0);
  SetDeviceState(0, 1);
  RefreshForTesting();
  // The runtime's accounting: the execution counted as busy for the time it ran, cut short by
  // the reset (not refused, which counts none; not run to its end).
  const uint64_t busy_us = DsCounter(0, 0, nds::kTimeInUse);
  EXPECT_GT(busy_us, 0u);
  EXPECT_LE(busy_us, static_cast<uint64_t>(
                         std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count()));
  EXPECT_EQ(DsCounter(0, 0, nds::kErrHw), 1u);
}

// With a real daemon: ctl inject, the kmsg record through printk, and the fault cleared.
class FaultsWithDaemonTest : public SimNodeTest {
 protected:
  void TearDown() override {
    SimNodeTest::TearDown();
    if (daemon_ > 0) {
      ::kill(daemon_, SIGTERM);
      WaitChild(daemon_, 30s);
    }
  }
  pid_t daemon_ = -1;
};

TEST_F(FaultsWithDaemonTest, HbmUeWritesTheKmsgRecordAndClearsTheFault) {
  // The daemon keeps ctl.sock under ROOT, which must stay short
  // (driver-sim/README.md#ctl-protocol).
  neuron::testing::TempDir short_root("nrtd");
  if (short_root.str().size() > 60) GTEST_SKIP() << "TMPDIR too long for ctl.sock";
  const RootPaths paths(short_root.path());
  daemon_ = Fork([&] {
    sim::DaemonOptions opts;
    opts.root = short_root.path();
    opts.spec = *FindInstance("trn1.2xlarge");
    opts.lnc = 1;
    opts.instance_id = "i-0123456789abcdef0";
    return sim::RunNodeDaemon(opts);
  });
  ASSERT_TRUE(WaitUntil([&] { return fs::exists(neuron::sim::SimReadyPath(paths)); }, 30s));
  ::setenv("NEURON_ROOT", short_root.str().c_str(), 1);
  ::setenv("NEURON_RT_VISIBLE_CORES", "1", 1);
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  nrt_model_t* m = Load(Neff(Ops(R"({"op": "vector", "flops": 1e6})")), 0);
  ASSERT_NE(m, nullptr);
  sim::CtlRequest inject;
  inject.command = "inject";
  inject.fault = sim::FaultKind::kHbmUe;
  inject.device = 0;
  inject.core = 1;
  absl::StatusOr<sim::CtlReply> reply = sim::SendCtlRequest(paths, inject, 5000ms);
  ASSERT_TRUE(reply.ok()) << reply.status();
  ASSERT_EQ(reply->outcome, sim::CtlOutcome::kOk) << reply->message;
  RefreshForTesting();
  StderrCapture quiet(dir_.path() / "err.txt");
  EXPECT_EQ(nrt_execute(m, nullptr, nullptr), NRT_EXEC_HW_ERR_HBM_UE);
  // docs/runtime.md#hardware-errors: the record names the device and core, with a prefix so NPD's
  // pattern matches.
  std::string kmsg;
  EXPECT_TRUE(WaitUntil(
      [&] {
        kmsg = ReadFileText(paths.Kmsg());
        return kmsg.find("NEURON_HW_ERR=") != std::string::npos;
      },
      10s));
  EXPECT_THAT(kmsg, HasSubstr("nrt: NEURON_HW_ERR=HBM_UNCORRECTABLE_ERROR "
                              "instance-id=i-0123456789abcdef0 hostname=sim-trn1.2xlarge "
                              "nd-id=0 nc-id=1 serial-num="));
  EXPECT_THAT(kmsg, HasSubstr(" action=TERMINATE_INSTANCE"));
  EXPECT_THAT(kmsg, HasSubstr("3,"));  // KERN_ERR record prefix "<prio>,<seq>,..."
  // The acted-on fault is cleared with ctl clear-fault.
  EXPECT_TRUE(WaitUntil(
      [&] { return ReadFileText(sim::FaultsPath(paths)).find("hbm-ue") == std::string::npos; },
      10s));
}

}  // namespace
}  // namespace neuron::nrt::testing

// A matmul with data (program.h, driver-sim/README.md#data-matmul) is computed for real, and an
// injected sdc succeeds with one flipped bit in its output: what the active check compares.
namespace neuron::nrt::testing {
namespace {

constexpr const char* kDataMatmul = R"({"version": 1,
  "inputs": [{"name": "a", "dtype": "float32", "shape": [2, 3]},
             {"name": "w", "dtype": "float32", "shape": [3, 2]}],
  "outputs": [{"name": "c", "dtype": "float32", "shape": [2, 2]}],
  "ops": [{"op": "matmul", "m": 2, "k": 3, "n": 2, "dtype": "float32",
           "input": "a", "weights": "w", "output": "c"}]})";

nrt_tensor_t* Tensor(const char* name, const std::vector<float>& values, size_t count) {
  nrt_tensor_t* t = nullptr;
  EXPECT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, count * sizeof(float), name, &t),
            NRT_SUCCESS);
  if (!values.empty()) {
    EXPECT_EQ(nrt_tensor_write(t, values.data(), 0, values.size() * sizeof(float)), NRT_SUCCESS);
  }
  return t;
}

TEST_F(FaultsTest, ADataMatmulComputesItsOutputAndSdcFlipsOneBitOfIt) {
  nrt_model_t* m = Load(Neff(kDataMatmul), 0);
  ASSERT_NE(m, nullptr);
  nrt_tensor_set_t* in = nullptr;
  nrt_tensor_set_t* out = nullptr;
  ASSERT_EQ(nrt_allocate_tensor_set(&in), NRT_SUCCESS);
  ASSERT_EQ(nrt_allocate_tensor_set(&out), NRT_SUCCESS);
  nrt_tensor_t* a = Tensor("a", {1, 2, 3, 4, 5, 6}, 6);
  nrt_tensor_t* w = Tensor("w", {1, -1, 0, 2, 3, 0}, 6);
  nrt_tensor_t* c = Tensor("c", {}, 4);
  ASSERT_EQ(nrt_add_tensor_to_tensor_set(in, "a", a), NRT_SUCCESS);
  ASSERT_EQ(nrt_add_tensor_to_tensor_set(in, "w", w), NRT_SUCCESS);
  ASSERT_EQ(nrt_add_tensor_to_tensor_set(out, "c", c), NRT_SUCCESS);
  const std::vector<float> want{10, 3, 22, 6};  // [[1,2,3],[4,5,6]] x [[1,-1],[0,2],[3,0]]
  std::vector<float> got(4);
  ASSERT_EQ(nrt_execute(m, in, out), NRT_SUCCESS);
  ASSERT_EQ(nrt_tensor_read(c, got.data(), 0, 16), NRT_SUCCESS);
  EXPECT_EQ(got, want);

  WriteFaults({Fault(9, sim::FaultKind::kSdc, 0, 0)});
  ASSERT_EQ(nrt_execute(m, in, out), NRT_SUCCESS);  // silent: the execution succeeds
  std::vector<uint8_t> bytes(16);
  std::vector<uint8_t> want_bytes(16);
  std::memcpy(want_bytes.data(), want.data(), 16);
  ASSERT_EQ(nrt_tensor_read(c, bytes.data(), 0, 16), NRT_SUCCESS);
  EXPECT_EQ(bytes[0], want_bytes[0] ^ 0x01);
  EXPECT_TRUE(std::equal(bytes.begin() + 1, bytes.end(), want_bytes.begin() + 1));
  ASSERT_EQ(nrt_execute(m, in, out), NRT_SUCCESS);  // one-shot: the next is right again
  ASSERT_EQ(nrt_tensor_read(c, got.data(), 0, 16), NRT_SUCCESS);
  EXPECT_EQ(got, want);
  nrt_destroy_tensor_set(&in);
  nrt_destroy_tensor_set(&out);
  for (nrt_tensor_t* t : {a, w, c}) nrt_tensor_free(&t);
}

TEST(DataMatmulParseTest, TensorsMustMatchTheShapeAndBeFloat32) {
  const std::string wrong_size =
      std::string(kDataMatmul)
          .replace(std::string(kDataMatmul).find("\"shape\": [3, 2]"), 15, "\"shape\": [3, 3]");
  const absl::StatusOr<Program> p = ParseOpList(wrong_size);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("tensor \"w\" must be float32"));
  const absl::StatusOr<Program> big = ParseOpList(Ops(
      R"({"op": "matmul", "m": 65, "k": 1, "n": 1, "input": "a", "weights": "w", "output": "c"})"));
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(std::string(big.status().message()), HasSubstr("at most 64"));
  const absl::StatusOr<Program> ok = ParseOpList(kDataMatmul);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(ok->has_data);
}

}  // namespace
}  // namespace neuron::nrt::testing
