#pragma once
// Datastore accounting (docs/runtime.md#accounting, docs/driver-interface.md#datastore): one
// ProcessDatastore per device the process holds cores on, per-core counters at each execution's
// completion, live memory counters, EFA traffic (D15, driver-sim/README.md#deviations), the
// process and model records, and the released flag at nrt_close.
//
// Per-core counter sets are indexed by physical core, as the driver folds them (set i into sysfs
// neuron_core<i>) and libnrt's `pnc_index` names them; logical core k of a device at LNC n owns
// sets k*n .. k*n+n-1. A logical core's figures go into its sets by the rule of
// docs/metrics.md#labels-and-liveness (counts sum the sets, busy time is their mean): busy time
// (TIME_IN_USE, CC_TIME) into every set, since each physical core was busy all of it; counts and
// latency sums into the first; memory bytes split, the first set taking the remainder
// (driver-sim/README.md#the-daemon-and-the-datastores).
//
// Thread-safety: counter updates are relaxed atomic adds on the mapped words, safe from any
// thread; model records and Release are serialised by an internal mutex.

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "driver-sim/runtime/device_nodes.h"
#include "driver-sim/runtime/memory.h"
#include "driver-sim/runtime/node_model.h"
#include "driver-sim/runtime/process_datastore.h"
#include "nrt/nrt_status.h"

namespace neuron::nrt {

inline constexpr uint64_t kEfaPacketBytes = 8192;  // ours: EFA traffic counted in 8 KiB packets

struct ProcessIdentity {
  pid_t pid = 0;
  std::string tag;  // NEURON_PROCESS_TAG, else the PID
  int8_t framework_type = 1;
  NdsVersion framework;
  NdsVersion runtime;
};

// One execution's figures, accounted when it completes.
struct ExecOutcome {
  NRT_STATUS status = NRT_SUCCESS;
  int64_t busy_ns = 0;    // the core was busy (collective waits included): TIME_IN_USE
  int64_t cc_ns = 0;      // in collectives, waiting included: CC_TIME
  int64_t device_ns = 0;  // from start on the core to completion: LATENCY_DEVICE, NC_TIME
  int64_t total_ns = 0;   // from submission to completion: LATENCY_TOTAL
  double macs = 0;        // MAC_COUNT (success only)
  uint32_t executions = 1;
};

struct CoreStatsSnapshot {
  uint64_t executions = 0;
  uint64_t busy_ns = 0;
  uint64_t cc_ns = 0;
  uint64_t last_exec_ns = 0;
};

class Accounting {
 public:
  // Claims the process's datastore slot on every device of `cores` (a global host range),
  // through the device fds of `devices`, which must outlive the Accounting.
  static absl::StatusOr<std::unique_ptr<Accounting>> Create(const NodeModel& node, int first_core,
                                                            int core_count,
                                                            const ProcessIdentity& who,
                                                            const DeviceNodes& devices);
  ~Accounting();

  void RecordExecution(int vnc, const ExecOutcome& outcome);
  // The counters of a failure that is not an execution outcome (load errors, QUEUE_FULL).
  void CountStatus(int vnc, NRT_STATUS status);
  void CountModelLoad(int vnc);
  // Busy time outside executions (host-driven barrier and all-gather).
  void AddBusy(int vnc, int64_t busy_ns, int64_t cc_ns);
  void SetDeviceMemory(int vnc, MemCategory cat, uint64_t bytes);
  void SetHostMemory(int device, MemCategory cat, uint64_t bytes);
  // Bytes a collective of this core sent and received over its device's nearest EFA.
  void AddEfaTraffic(int vnc, uint64_t tx_bytes, uint64_t rx_bytes);
  void AddModelRecord(const NdsModel& model, int vnc);
  void RemoveModelRecord(uint32_t model_id, int vnc);

  CoreStatsSnapshot Stats(int vnc) const;
  // Releases every datastore (RELEASE_NEURON_DS, nrt_close) and unmaps them. Idempotent.
  void Release();
  // The datastore of a device (nullptr if the process has no core there); for tests.
  const ProcessDatastore* DatastoreOf(int device) const;

 private:
  using CounterWords = std::array<uint64_t*, 64>;  // NC index -> mapped counter (0..40 used)
  struct Slot {
    ProcessDatastore* ds = nullptr;
    int device = 0;
    int device_core = 0;  // logical core within the device
    int efa = -1;
    std::vector<CounterWords> sets;  // the counter sets of its physical cores, in order
    std::atomic<uint64_t> executions{0};
    std::atomic<uint64_t> busy_ns{0};
    std::atomic<uint64_t> cc_ns{0};
    std::atomic<uint64_t> latency_device_ns{0};
    std::atomic<uint64_t> latency_total_ns{0};
    std::atomic<uint64_t> last_exec_ns{0};
    std::atomic<double> macs{0};
  };
  Accounting() = default;
  // Counts and latency sums: the first physical core's set.
  void Add(Slot& s, int index, uint64_t delta);
  void Store(Slot& s, int index, uint64_t value);
  // Busy time: every set.
  void StoreTime(Slot& s, int index, uint64_t value);
  // Bytes: split over the sets, the first taking the remainder.
  void StoreSplit(Slot& s, int index, uint64_t value);

  std::mutex mu_;
  std::vector<std::unique_ptr<ProcessDatastore>> datastores_;  // by device; null if unused
  std::vector<std::unique_ptr<Slot>> slots_;                   // by vnc
  bool released_ = false;
};

}  // namespace neuron::nrt
