// Executions: the timing model's calibration points (docs/hardware.md#timing-model), accounting at
// completion (docs/runtime.md#accounting), async queues and QUEUE_FULL, the execution timeout, and
// profiles.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

#include "driver-sim/runtime/clock.h"
#include "driver-sim/runtime/engine_model.h"
#include "tests/driver-sim/runtime/runtime_test_util.h"

namespace neuron::nrt::testing {
namespace {

using ::testing::HasSubstr;

// docs/hardware.md#calibration-points row 1: BF16 [4096,8192] @ [8192,8192] on one NC-v2 takes 6.97
// ms.
constexpr const char* kGemm =
    R"({"op": "matmul", "m": 4096, "k": 8192, "n": 8192, "dtype": "bfloat16"})";

class ExecTest : public SimNodeTest {
 protected:
  void UseManualClock() { SetClockForTesting(std::make_shared<ManualClock>(1'000'000'000)); }
};

TEST_F(ExecTest, GemmCalibrationPointOnOneNcV2) {
  MakeNode("trn1.32xlarge");
  UseManualClock();
  ::setenv("NEURON_RT_VISIBLE_CORES", "0", 1);
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  nrt_model_t* m = Load(Neff(Ops(kGemm)));
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(nrt_execute(m, nullptr, nullptr), NRT_SUCCESS);
  // 6.97 ms +-10%, as the busy time the datastore accounts (µs).
  const uint64_t busy_us = DsCounter(0, 0, nds::kTimeInUse);
  EXPECT_GE(busy_us, 6273u);
  EXPECT_LE(busy_us, 7667u);
  nrtsim_model_estimate_t est{};
  ASSERT_EQ(nrtsim_get_model_estimate(m, &est), NRT_SUCCESS);
  EXPECT_EQ(est.duration_ns / 1000, busy_us);
  // MAC_COUNT: M·K·N multiply-accumulates (flop_count = 2 × MAC,
  // docs/driver-interface.md#core-counter-indices).
  EXPECT_EQ(DsCounter(0, 0, nds::kMacCount), 4096ull * 8192 * 8192);
  EXPECT_EQ(DsCounter(0, 0, nds::kInferCompleted), 1u);
  EXPECT_EQ(DsCounter(0, 0, nds::kInferenceCount), 1u);
  // LATENCY_TOTAL and LATENCY_DEVICE: the execution's latency added to their µs totals
  // (docs/metrics.md#executions-errors-latency divides their rise by INFER_COMPLETED's).
  EXPECT_EQ(DsCounter(0, 0, nds::kLatencyTotal), busy_us);
  EXPECT_EQ(DsCounter(0, 0, nds::kLatencyDevice), busy_us);
  nrtsim_core_stats_t stats{};
  ASSERT_EQ(nrtsim_get_core_stats(0, &stats), NRT_SUCCESS);
  EXPECT_EQ(stats.executions, 1u);
  EXPECT_EQ(stats.busy_ns / 1000, busy_us);
}

TEST_F(ExecTest, Lnc2LogicalCoreRunsAtTwicePhysicalPeak) {
  MakeNode("trn2.48xlarge", 2);
  UseManualClock();
  ::setenv("NEURON_RT_VISIBLE_CORES", "0", 1);
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  nrt_model_t* m = Load(Neff(Ops(kGemm)));
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(nrt_execute(m, nullptr, nullptr), NRT_SUCCESS);
  // docs/hardware.md#engine-model: the GEMM's 16,777,216 TensorE cycles at 2.4 GHz on NC-v3, two
  // physical cores at LNC=2, at the efficiency calibrated on NC-v2: ~4.07 ms.
  const double expected_us = kGemmCalibrationCycles / (2 * 2.4e9) / kTensorEfficiency * 1e6;
  const double busy_us = static_cast<double>(DsCounter(0, 0, nds::kTimeInUse));
  EXPECT_NEAR(busy_us, expected_us, expected_us * 0.1);
}

TEST_F(ExecTest, Lnc1CoreOfTheSameChipIsHalfAsFast) {
  MakeNode("trn2.48xlarge", 1);
  UseManualClock();
  ::setenv("NEURON_RT_VISIBLE_CORES", "0", 1);
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  nrt_model_t* m = Load(Neff(Ops(kGemm)));
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(nrt_execute(m, nullptr, nullptr), NRT_SUCCESS);
  const double expected_us = kGemmCalibrationCycles / 2.4e9 / kTensorEfficiency * 1e6;
  const double busy_us = static_cast<double>(DsCounter(0, 0, nds::kTimeInUse));
  EXPECT_NEAR(busy_us, expected_us, expected_us * 0.1);
}

TEST_F(ExecTest, WallClockExecutionTakesItsModelledTime) {
  MakeNode("trn1.2xlarge");
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  // 2.2e10 bytes at the core's 410 GiB/s HBM share (the DMA queues' 432 GiB/s are faster): about
  // 50 ms (docs/hardware.md#engine-model).
  nrt_model_t* m = Load(Neff(Ops(R"({"op": "dma", "bytes": 2.2e10})")));
  ASSERT_NE(m, nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(nrt_execute(m, nullptr, nullptr), NRT_SUCCESS);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, 49ms);
  EXPECT_LT(took, 5s);
  EXPECT_GE(DsCounter(0, 0, nds::kTimeInUse), 49000u);
}

struct Completion {
  uint32_t vnc;
  uint64_t job_id;
  NRT_STATUS status;
};
std::mutex g_done_mu;
std::vector<Completion> g_done;

void OnDone(void*, uint32_t, uint32_t vnc, uint64_t job_id, NRT_STATUS status) {
  std::lock_guard<std::mutex> lock(g_done_mu);
  g_done.push_back({vnc, job_id, status});
}

TEST_F(ExecTest, AsyncQueueFullBeyondTheInflightLimit) {
  MakeNode("trn1.2xlarge");
  ::setenv("NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS", "2", 1);
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  g_done.clear();
  ASSERT_EQ(nrt_register_async_exec_callback(&OnDone, nullptr), NRT_SUCCESS);
  nrt_model_t* m = Load(Neff(Ops(R"({"op": "dma", "bytes": 1e11})")), 0);  // ~280 ms each
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(nrt_execute(m, nullptr, nullptr), NRT_SUCCESS);  // queued, returns at once
  EXPECT_EQ(nrt_execute(m, nullptr, nullptr), NRT_SUCCESS);
  EXPECT_EQ(nrt_execute(m, nullptr, nullptr), NRT_QUEUE_FULL);
  EXPECT_EQ(DsCounter(0, 0, nds::kInferFailedToQueue), 1u);
  ASSERT_EQ(nrt_async_drain_queued_execs(0), NRT_SUCCESS);
  {
    std::lock_guard<std::mutex> lock(g_done_mu);
    ASSERT_EQ(g_done.size(), 2u);
    EXPECT_EQ(g_done[0].status, NRT_SUCCESS);
    EXPECT_EQ(g_done[1].status, NRT_SUCCESS);
    EXPECT_LT(g_done[0].job_id, g_done[1].job_id);
    EXPECT_EQ(g_done[0].vnc, 0u);
  }
  EXPECT_EQ(DsCounter(0, 0, nds::kInferCompleted), 2u);
  // Room again once drained.
  EXPECT_EQ(nrt_execute(m, nullptr, nullptr), NRT_SUCCESS);
  ASSERT_EQ(nrt_async_drain_queued_execs(0), NRT_SUCCESS);
  nrt_register_async_exec_callback(nullptr, nullptr);
}

TEST_F(ExecTest, ExecutionPastTheTimeoutIsTimeout) {
  MakeNode("trn1.2xlarge");
  UseManualClock();
  ::setenv("NEURON_RT_EXEC_TIMEOUT", "1", 1);
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  nrt_model_t* m = Load(Neff(Ops(R"({"op": "dma", "bytes": 7e11})")), 0);  // ~2 s
  ASSERT_NE(m, nullptr);
  StderrCapture err(dir_.path() / "err.txt");
  EXPECT_EQ(nrt_execute(m, nullptr, nullptr), NRT_TIMEOUT);
  EXPECT_THAT(err.Text(), HasSubstr("execution timeout (1000 ms)"));
  err.Restore();
  EXPECT_EQ(DsCounter(0, 0, nds::kInferTimedOut), 1u);
  EXPECT_EQ(DsCounter(0, 0, nds::kTimeInUse), 1'000'000u);  // busy until the timeout
  EXPECT_EQ(DsCounter(0, 0, nds::kInferCompleted), 0u);
}

TEST_F(ExecTest, RepeatAndOutputCompletions) {
  MakeNode("trn1.2xlarge");
  UseManualClock();
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  nrt_model_t* m = Load(Neff(Ops(R"({"op": "vector", "flops": 1e9})")), 1);
  ASSERT_NE(m, nullptr);
  nrt_tensor_set_t* out = nullptr;
  nrt_tensor_t* t = nullptr;
  ASSERT_EQ(nrt_allocate_tensor_set(&out), NRT_SUCCESS);
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 1, 64, "o", &t), NRT_SUCCESS);
  ASSERT_EQ(nrt_add_tensor_to_tensor_set(out, "o", t), NRT_SUCCESS);
  ASSERT_EQ(nrt_execute_repeat(m, nullptr, out, 3), NRT_SUCCESS);
  EXPECT_EQ(DsCounter(0, 1, nds::kInferCompleted), 3u);
  EXPECT_EQ(DsCounter(0, 1, nds::kInferenceCount), 3u);
  EXPECT_EQ(nrt_tensor_check_output_completion(t, 0, 1), NRT_SUCCESS);
  EXPECT_EQ(nrt_tensor_check_output_completion(t, 1000, 2), NRT_TIMEOUT);
  ASSERT_EQ(nrt_tensor_reset_output_completion(t), NRT_SUCCESS);
  EXPECT_EQ(nrt_tensor_check_output_completion(t, 0, 1), NRT_TIMEOUT);
  nrt_destroy_tensor_set(&out);
  nrt_tensor_free(&t);
}

TEST_F(ExecTest, ProfileIsChromeTraceWithEngineSpans) {
  MakeNode("trn1.2xlarge");
  UseManualClock();
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  nrt_model_t* m = Load(Neff(Ops(R"(
      {"op": "dma", "bytes": 1e8, "name": "load"},
      {"op": "matmul", "m": 1024, "k": 1024, "n": 1024, "name": "qk"},
      {"op": "vector", "flops": 1e9, "name": "softmax"},
      {"op": "scalar", "flops": 1e9, "name": "gelu"})")),
                        0);
  ASSERT_NE(m, nullptr);
  const fs::path file = dir_.path() / "profile.json";
  ASSERT_EQ(nrt_profile_start(m, file.c_str()), NRT_SUCCESS);
  ASSERT_EQ(nrt_execute(m, nullptr, nullptr), NRT_SUCCESS);
  ASSERT_EQ(nrt_execute(m, nullptr, nullptr), NRT_SUCCESS);
  ASSERT_EQ(nrt_profile_stop(file.c_str()), NRT_SUCCESS);
  const nlohmann::json doc = nlohmann::json::parse(ReadFileText(file));
  std::map<std::string, int> spans_by_engine;
  std::map<std::string, std::vector<double>> qk_starts;  // by engine track
  double span_us = 0;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    const std::string engine = e.at("cat").get<std::string>();
    spans_by_engine[engine]++;
    EXPECT_EQ(e.at("pid"), 0);
    if (e.at("name") == "qk") qk_starts[engine].push_back(e.at("ts").get<double>());
    // The matmul's operand DMA runs beside TensorE on its own track: not extra time.
    if (!(engine == "DMA" && e.at("name") == "qk")) span_us += e.at("dur").get<double>();
  }
  EXPECT_EQ(spans_by_engine["DMA"], 4);  // the load twice, and the matmul's operands twice
  EXPECT_EQ(spans_by_engine["TensorE"], 2);
  EXPECT_EQ(spans_by_engine["VectorE"], 2);
  EXPECT_EQ(spans_by_engine["ScalarE"], 2);
  EXPECT_EQ(qk_starts["DMA"], qk_starts["TensorE"]);  // overlapped, docs/hardware.md#engine-model
  // The compute spans and two 60 µs launches make up the busy time.
  EXPECT_NEAR(span_us + 2 * 60, static_cast<double>(DsCounter(0, 0, nds::kTimeInUse)), 2.0);
  EXPECT_EQ(nrt_profile_stop(file.c_str()), NRT_INVALID);  // not started
}

}  // namespace
}  // namespace neuron::nrt::testing
