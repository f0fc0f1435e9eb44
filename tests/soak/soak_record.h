#pragma once
// What the soak did and what became of it, and the rule that tells an explained workload failure
// from an invariant violation (docs/RELIABILITY.md#soak). Every fault is recorded with its target
// and its time, every workload with its cores, devices, life, exit status and own log file. Pure:
// no I/O apart from what the callers pass in.
//
// A workload failure is *expected* when both hold:
//   1. a disruption hit one of its devices (for an injected fault naming a core: one of its
//      cores) while the workload lived: an injected execution fault still pending (the simulator
//      keeps it until a completed reset or an unplug of the device clears it, so one injected
//      before the workload started counts), a reset in progress, a device left INVALID by a
//      failed reset, or an unplugged device;
//   2. its log names a status the runtime gives for that disruption (docs/runtime.md#faults,
//      #hardware-errors, #status-codes; driver-sim/runtime/executor.cc FaultStatus):
//      hbm-ue -> NRT_EXEC_HW_ERR_HBM_UE (1201), sram-ue -> NRT_EXEC_HW_ERR_NC_UE (1202),
//      dma-abort -> NRT_EXEC_HW_ERR_DMA_ABORT (1203), hang -> NRT_TIMEOUT (5); a device not READY
//      (in reset, INVALID, absent) -> NRT_HW_ERROR (6) from an execution, or NRT_FAILURE (1)
//      from nrt_init, whose open of the device node the driver refuses. An injected NaN fails
//      nothing: the step is skipped.
// A reset is a repair for the device but aborts whatever runs on it, so it counts as a
// disruption here while the report lists it under repairs.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace neuron::soak {

// One fault request the soak sent to the simulator (docs/RELIABILITY.md#soak).
struct FaultEvent {
  double sent_s = 0;     // seconds since the soak started, when the request was sent
  double replied_s = 0;  // ... and when the daemon answered
  std::string kind;      // "inject hbm-ue", "reset", "reset --fail", "unplug", "plug", "efa-down"
  int device = -1;       // -1: an EFA event
  std::optional<int> core;  // the device's core an injected fault names
  std::string efa;
  bool accepted = false;  // the daemon did it (false: refused, e.g. a reset in progress)
};

// Damage makes hardware unhealthy; repair brings it back.
bool IsDamage(std::string_view kind);

// One `neuron-sim run` workload in its pod.
struct WorkloadRecord {
  int n = 0;
  std::string pod;
  bool quiet = false;        // runs on the quiet devices, which no fault touches
  std::vector<int> devices;  // host devices
  std::vector<int> cores;    // global cores (all cores of a device held whole)
  double start_s = 0;
  std::optional<double> end_s;      // when it was reaped
  std::optional<int> exit_code;     // 128 + signal when killed
  bool stopped_by_kubelet = false;  // its pod was deleted while it ran
  std::string log;                  // its own log file
};

// The NRT status codes a workload's log reports for its failure: the "(N)" closing each
// "neuron-sim run: ..." error line (StatusText: "NAME (N)").
std::set<int> FailureCodes(std::string_view log);

// The status of a "neuron-sim run: nrt_init failed: NAME (N)" line; nullopt without one.
std::optional<int> InitFailureCode(std::string_view log);

struct Verdict {
  enum class Kind { kOk, kExpected, kViolation };
  Kind kind = Kind::kOk;
  std::string why;    // for kExpected, the fault; for kViolation, what is wrong
  std::string cause;  // for kExpected, the fault's kind ("inject hang", "reset", ...)
};

// The rule above. `reset_s` is the simulator's reset duration; `now_s` closes the life of a
// workload still running. `log` is the workload's log text.
Verdict Classify(const WorkloadRecord& w, const std::vector<FaultEvent>& events,
                 int cores_per_device, double reset_s, double now_s, std::string_view log);

// The last `lines` lines of `text`.
std::string LastLines(std::string_view text, int lines);

// "1.25 inject hbm-ue device 3 core 1 ok" / "... efa efa2 refused": one line of the faults log.
std::string Describe(const FaultEvent& e);
// "#12 p40 quiet cores 28,29 devices 14 1.0-3.5 s exit 0 log workloads/12-p40.log".
std::string Describe(const WorkloadRecord& w);

}  // namespace neuron::soak
