// The soak's rule for workload failures (tests/soak/soak_record.h): which failures a fault
// explains and which are invariant violations.
#include "tests/soak/soak_record.h"

#include <gtest/gtest.h>

namespace neuron::soak {
namespace {

using Kind = Verdict::Kind;
constexpr int kCoresPerDevice = 2;
constexpr double kReset = 0.3;

FaultEvent Event(double t, std::string kind, int device, std::optional<int> core = std::nullopt,
                 bool accepted = true) {
  FaultEvent e;
  e.sent_s = t;
  e.replied_s = t + 0.01;
  e.kind = std::move(kind);
  e.device = device;
  e.core = core;
  e.accepted = accepted;
  return e;
}

// A workload on device 3 (cores 6, 7) from 10 s to 20 s that exited `code`.
WorkloadRecord Workload(int code, bool quiet = false) {
  WorkloadRecord w;
  w.pod = "p1";
  w.quiet = quiet;
  w.devices = {3};
  w.cores = {6, 7};
  w.start_s = 10;
  w.end_s = 20;
  w.exit_code = code;
  return w;
}

const char kHbmLog[] =
    "step 1: ...\n"
    "neuron-sim run: step 2: core 0 (nd3 nc0): matmul: nrt_execute: "
    "NRT_EXEC_HW_ERR_HBM_UE (1201)\n";
const char kHwErrorLog[] =
    "neuron-sim run: step 8: core 1 (nd3 nc1): matmul: nrt_execute: NRT_HW_ERROR (6)\n";

Verdict Judge(const WorkloadRecord& w, const std::vector<FaultEvent>& events,
              std::string_view log) {
  return Classify(w, events, kCoresPerDevice, kReset, 100, log);
}

TEST(FailureCodes, ReadsTheStatusClosingEachErrorLine) {
  EXPECT_EQ(FailureCodes(kHbmLog), (std::set<int>{1201}));
  EXPECT_EQ(FailureCodes("neuron-sim run: nrt_init failed: NRT_INVALID (2)\n"
                         "neuron-sim run: step 1: core 0 (nd1 nc0): x: NRT_TIMEOUT (5)"),
            (std::set<int>{2, 5}));
  // Not an error line, or no code at its end.
  EXPECT_TRUE(FailureCodes("step 3: core 0 (nd1 nc0): results contain NaN (1003)\n").empty());
  EXPECT_TRUE(FailureCodes("neuron-sim run: --steps must be >= 0 (0: until SIGTERM)\n").empty());
}

TEST(Classify, ExitZeroIsFine) {
  EXPECT_EQ(Judge(Workload(0), {}, "").kind, Kind::kOk);
  EXPECT_EQ(Judge(Workload(0, true), {}, "").kind, Kind::kOk);
}

TEST(Classify, NoExitStatusIsAViolation) {
  WorkloadRecord w = Workload(0);
  w.exit_code.reset();
  EXPECT_EQ(Judge(w, {}, "").kind, Kind::kViolation);
}

TEST(Classify, FailureWithoutAFaultIsAViolation) {
  const Verdict v = Judge(Workload(1), {Event(12, "inject hbm-ue", 4)}, kHbmLog);
  EXPECT_EQ(v.kind, Kind::kViolation);
  EXPECT_NE(v.why.find("no fault on its devices"), std::string::npos) << v.why;
}

TEST(Classify, InjectedFaultDuringItsLifeWithItsStatusIsExpected) {
  const Verdict v = Judge(Workload(1), {Event(12, "inject hbm-ue", 3)}, kHbmLog);
  EXPECT_EQ(v.kind, Kind::kExpected) << v.why;
  EXPECT_EQ(v.cause, "inject hbm-ue");
}

TEST(Classify, TheStatusMustBeTheOneTheFaultMapsTo) {
  const Verdict v = Judge(Workload(1), {Event(12, "inject sram-ue", 3)}, kHbmLog);
  EXPECT_EQ(v.kind, Kind::kViolation);
  EXPECT_NE(v.why.find("give 1202"), std::string::npos) << v.why;
}

TEST(Classify, AFaultPendingSinceBeforeTheStartCounts) {
  EXPECT_EQ(Judge(Workload(1), {Event(2, "inject hbm-ue", 3)}, kHbmLog).kind, Kind::kExpected);
}

TEST(Classify, AResetBeforeTheStartClearsAPendingFault) {
  EXPECT_EQ(Judge(Workload(1), {Event(2, "inject hbm-ue", 3), Event(5, "reset", 3)}, kHbmLog).kind,
            Kind::kViolation);
  // A failed reset clears nothing, and neither does a refused one.
  EXPECT_EQ(
      Judge(Workload(1), {Event(2, "inject hbm-ue", 3), Event(5, "reset --fail", 3)}, kHbmLog).kind,
      Kind::kExpected);
  EXPECT_EQ(
      Judge(Workload(1), {Event(2, "inject hbm-ue", 3), Event(5, "reset", 3, std::nullopt, false)},
            kHbmLog)
          .kind,
      Kind::kExpected);
}

TEST(Classify, AFaultAfterTheEndOrOnAnotherCoreDoesNot) {
  EXPECT_EQ(Judge(Workload(1), {Event(25, "inject hbm-ue", 3)}, kHbmLog).kind, Kind::kViolation);
  WorkloadRecord one_core = Workload(1);
  one_core.cores = {6};  // device 3's core 0
  EXPECT_EQ(Judge(one_core, {Event(12, "inject hbm-ue", 3, 1)}, kHbmLog).kind, Kind::kViolation);
  EXPECT_EQ(Judge(one_core, {Event(12, "inject hbm-ue", 3, 0)}, kHbmLog).kind, Kind::kExpected);
}

TEST(Classify, NanFailsNothing) {
  EXPECT_EQ(Judge(Workload(1), {Event(12, "inject nan", 3)}, kHwErrorLog).kind, Kind::kViolation);
}

TEST(Classify, ResetInProgressGivesHwError) {
  EXPECT_EQ(Judge(Workload(1), {Event(15, "reset", 3)}, kHwErrorLog).kind, Kind::kExpected);
  // Completed 0.3 s after its reply, well before the start.
  EXPECT_EQ(Judge(Workload(1), {Event(9, "reset", 3)}, kHwErrorLog).kind, Kind::kViolation);
}

TEST(Classify, UnpluggedUntilPlugged) {
  EXPECT_EQ(Judge(Workload(1), {Event(5, "unplug", 3)}, kHwErrorLog).kind, Kind::kExpected);
  EXPECT_EQ(Judge(Workload(1), {Event(5, "unplug", 3), Event(8, "plug", 3)}, kHwErrorLog).kind,
            Kind::kViolation);
  EXPECT_EQ(Judge(Workload(1), {Event(5, "reset --fail", 3)}, kHwErrorLog).kind, Kind::kExpected);
}

TEST(Classify, NrtInitFailureOnlyForADeviceNotReady) {
  const char log[] =
      "ERROR NRT:nrt_init open /dev/neuron3: Invalid argument\n"
      "neuron-sim run: nrt_init failed: NRT_FAILURE (1)\n";
  EXPECT_EQ(InitFailureCode(log), 1);
  EXPECT_EQ(InitFailureCode(kHwErrorLog), std::nullopt);
  EXPECT_EQ(Judge(Workload(1), {Event(9.9, "reset --fail", 3)}, log).kind, Kind::kExpected);
  EXPECT_EQ(Judge(Workload(1), {Event(12, "inject hang", 3)}, log).kind, Kind::kViolation);
  // NRT_FAILURE from an execution is not nrt_init's refusal.
  EXPECT_EQ(Judge(Workload(1), {Event(12, "reset", 3)},
                  "neuron-sim run: step 1: core 0 (nd3 nc0): x: NRT_FAILURE (1)\n")
                .kind,
            Kind::kViolation);
}

TEST(Classify, AQuietWorkloadMustExitZero) {
  const Verdict v = Judge(Workload(1, true), {Event(12, "inject hbm-ue", 3)}, kHbmLog);
  EXPECT_EQ(v.kind, Kind::kViolation);
}

TEST(IsDamage, SplitsDamageFromRepair) {
  for (const char* k : {"inject hang", "unplug", "reset --fail", "efa-down"}) {
    EXPECT_TRUE(IsDamage(k)) << k;
  }
  for (const char* k : {"reset", "plug", "efa-up"}) EXPECT_FALSE(IsDamage(k)) << k;
}

TEST(LastLines, KeepsTheTail) {
  EXPECT_EQ(LastLines("a\nb\nc\n", 2), "b\nc");
  EXPECT_EQ(LastLines("a\nb\nc", 5), "a\nb\nc");
  EXPECT_EQ(LastLines("", 3), "");
}

}  // namespace
}  // namespace neuron::soak
