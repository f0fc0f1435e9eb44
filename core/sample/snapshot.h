#pragma once
// One sample of every counter the agent reads (docs/driver-interface.md#sysfs-tree,
// #counter-semantics, #datastore, #efa), as the Sampler (core/sample/sampler.h) produces it.
// Immutable once published and shared as std::shared_ptr<const Snapshot>, so any number of threads
// may read it.
//
// Every field is std::optional: a file that does not exist is absent, never 0
// (docs/style.md#partial-data); a file that exists but is malformed is absent too, with an error
// naming it in `errors`.
//
// Which sweep read what (docs/architecture.md#sampling-cost): a kFull snapshot read every file. A
// kHot snapshot read only the hot set, marked [hot] below, plus the live datastores; every other
// field is carried forward from the previous snapshot and was read by the sweep named in
// DeviceSample::full_generation (status and other_info totals: exit_counters_generation).

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/driver/sysfs_names.h"
#include "core/sample/datastore.h"
#include "core/sample/runtime_records.h"

namespace neuron {

enum class SampleKind { kHot, kFull };

// {total, present} counter files (status, other_info).
struct CounterPair {
  std::optional<uint64_t> total;
  std::optional<uint64_t> present;
  bool operator==(const CounterPair&) const = default;
};

// {total, present, peak} memory counter files: bytes allocated now, size of the last
// allocation or free, high-water mark (docs/driver-interface.md#total-present-peak).
struct MemCounter {
  std::optional<uint64_t> total;
  std::optional<uint64_t> present;
  std::optional<uint64_t> peak;
  bool operator==(const MemCounter&) const = default;
};

enum class PowerStatus { kValid, kNoData, kInvalid };

// stats/power/utilization: "<status>,<epoch>,<min>,<max>,<avg>"
// (docs/driver-interface.md#computed-formats), percentages of max power.
struct PowerReading {
  PowerStatus status = PowerStatus::kNoData;
  int64_t epoch_s = 0;  // rollup time; 0 before the first rollup
  double min_percent = 0;
  double max_percent = 0;
  double avg_percent = 0;
  bool operator==(const PowerReading&) const = default;
};

// One row of stats/tensor_engine/pe_cntrs: cycle counters of a PE row group
// (docs/driver-interface.md#computed-formats).
struct PeCounterRow {
  int row_group = 0;
  uint64_t mm_active = 0;
  uint64_t wl_active = 0;
  uint64_t idle = 0;
  bool operator==(const PeCounterRow&) const = default;
};

// One row of stats/power/utilization_raw (driver 2.29): the last power sample the driver took of
// one die (docs/driver-interface.md#driver-generations).
struct PowerDieReading {
  enum class State { kGood, kUnavailable, kReadError, kBogus };
  int die = 0;
  State state = State::kUnavailable;
  uint32_t util_bips = 0;  // share of max power in basis points (10000 = 100%); kGood, kBogus
  uint32_t counter = 0;    // the firmware's sample counter (16 bits); kGood, kBogus
  bool operator==(const PowerDieReading&) const = default;
};

// ---- The counter lists of core/driver/counters.h as structs of typed fields, one field per
// file, named as the file. Members() lists the fields' member pointers in list order (the order
// of the list's names and handles), for code that reads or writes every field of a list.
#define NEURON_COUNTER_FIELD(file, ...) Value file;
#define NEURON_COUNTER_MEMBER(file, ...) &Self::file,
#define NEURON_COUNTER_STRUCT(Name, ValueType, LIST)  \
  struct Name {                                       \
    using Value = ValueType;                          \
    LIST(NEURON_COUNTER_FIELD)                        \
    static constexpr auto Members() {                 \
      using Self = Name;                              \
      return std::array{LIST(NEURON_COUNTER_MEMBER)}; \
    }                                                 \
    bool operator==(const Name&) const = default;     \
  }

NEURON_COUNTER_STRUCT(HardwareCounters, std::optional<uint64_t>, NEURON_HARDWARE_COUNTERS);
NEURON_COUNTER_STRUCT(HealthStatusCounters, std::optional<uint64_t>, NEURON_HEALTH_STATUS_COUNTERS);
NEURON_COUNTER_STRUCT(EccCorrectedCounters, std::optional<uint64_t>, NEURON_ECC_CORRECTED_COUNTERS);
NEURON_COUNTER_STRUCT(OtherInfoCounters, CounterPair, NEURON_OTHER_INFO_COUNTERS);
NEURON_COUNTER_STRUCT(EfaPortCounters, std::optional<uint64_t>, NEURON_EFA_PORT_COUNTERS);
NEURON_COUNTER_STRUCT(EfaDeviceCounters, std::optional<uint64_t>, NEURON_EFA_DEVICE_COUNTERS);

#undef NEURON_COUNTER_STRUCT
#undef NEURON_COUNTER_MEMBER
#undef NEURON_COUNTER_FIELD

// The field of `counters` that `handle` names (for code that holds a handle, not a field).
template <typename Counters, typename Handle>
constexpr auto Member(Handle handle) {
  return Counters::Members()[Index(handle)];
}

// Calls f(name, value) for every field of `counters`, in list order; `names` is the list's names.
template <typename Counters, size_t N, typename F>
void ForEachCounter(const Counters& counters, const std::array<std::string_view, N>& names, F&& f) {
  static_assert(Counters::Members().size() == N);
  for (size_t i = 0; i < N; ++i) f(names[i], counters.*Counters::Members()[i]);
}

// neuron_core<i>/ of one physical core.
struct CoreSample {
  int physical_index = -1;
  std::array<CounterPair, kStatusCounters.size()> status;  // kStatusCounters order
  MemCounter device_mem;                                   // [hot] total
  std::array<MemCounter, kDeviceMemCategories.size()> device_mem_by_category;
  MemCounter host_mem;  // [hot] total
  OtherInfoCounters other_info;
  std::optional<std::vector<PeCounterRow>> pe_counters;
};

struct DeviceSample {
  int index = -1;
  std::optional<DeviceState> state;  // [hot] reset
  HardwareCounters hardware;         // stats/hardware/ ([hot]: the rows of Sweep::kHot)
  std::optional<PowerReading> power;
  std::optional<std::string> serial_number;  // absent when the firmware read fails ("\n")
  std::array<MemCounter, kHostMemCategories.size()> host_mem;  // [hot] totals
  std::vector<CoreSample> cores;  // physical cores 0..core_count-1 from the inventory
  // Files of the optional node groups (core/driver/driver_generations.h), read where the
  // device's tree holds them (NeuronDevice::sysfs_groups), absent elsewhere:
  // stats/hardware/health_status/, stats/hardware/{sram,mem}_ecc_corrected and
  // stats/power/utilization_raw, one entry per die.
  HealthStatusCounters health_status;
  EccCorrectedCounters ecc_corrected;
  std::optional<std::vector<PowerDieReading>> power_raw;

  // The snapshot generation whose sweep read the fields not marked [hot] (this snapshot's own
  // for a kFull one), and the one that last read the status and other_info totals: a hot sample
  // re-reads those when one of this device's datastore entries went away (see sampler.h).
  uint64_t full_generation = 0;
  uint64_t exit_counters_generation = 0;
};

// One EFA device (docs/driver-interface.md#efa); port 1, the only port EFA has.
struct EfaSample {
  std::string name;
  int port = 1;
  std::optional<int> port_state;  // 4 in "4: ACTIVE"
  std::optional<std::string> port_state_name;
  std::optional<int> phys_state;  // 5 in "5: LinkUp"
  std::optional<std::string> phys_state_name;
  std::optional<std::string> rate;  // "100 Gb/sec (4X EDR)"
  std::optional<double> rate_gbps;  // 100
  EfaPortCounters port_counters;
  EfaDeviceCounters device_counters;
  uint64_t full_generation = 0;  // all EFA fields come from full sweeps
};

struct Snapshot {
  uint64_t generation = 0;  // 1, 2, ... per Sample() call of one Sampler
  SampleKind kind = SampleKind::kFull;
  std::chrono::steady_clock::time_point steady;  // when the sample started
  std::chrono::system_clock::time_point wall;
  std::chrono::nanoseconds duration{0};  // how long the sample took
  int lnc = 1;
  // Present devices, ascending index. A device of the inventory whose directory is gone
  // (unplugged) is left out.
  std::vector<DeviceSample> devices;
  std::vector<EfaSample> efas;             // present EFA devices, in inventory order
  std::vector<DatastoreRecord> processes;  // live datastores, ascending (device, pid)
  // Whether live datastores could be read at all (docs/architecture.md#unknown-is-not-zero): when
  // not, `processes` is empty because nothing could be seen, not because nothing runs.
  SourceState datastore_source;
  // The runtimes' records of those processes, read through libnrt where it could be loaded
  // (core/sample/runtime_records.h); state.known is false when no records reader is configured.
  RuntimeRecordsScan runtime_records;
  std::vector<std::string> errors;  // this sample's errors, each naming its file

  const DeviceSample* FindDevice(int index) const;
  const EfaSample* FindEfa(std::string_view name) const;
};

// ---- Derived figures that consumers share (docs/metrics.md#labels-and-liveness,
// docs/tools-ux.md#top-data) ----

// Physical cores [first, first + count) that logical core `k` covers: k*lnc .. k*lnc+lnc-1.
struct PhysicalRange {
  int first = 0;
  int count = 1;
};
PhysicalRange PhysicalCoresOf(int logical_core, int lnc);

// Cumulative figures of one logical core: the sysfs totals of its physical cores (runtime
// counters folded in at process exit, set i into neuron_core<i>) plus the live counter sets of
// those physical cores in every datastore. Absent when the sysfs file is absent.
struct LogicalCoreTotals {
  int logical_index = -1;
  // nc_time_in_use µs: the mean over the physical cores of the group (both run a logical core's
  // work; libnrt-sim writes its busy time into both sets: driver-sim/README.md).
  std::optional<uint64_t> busy_us;
  // Counts sum the physical cores of the group (libnrt-sim writes them into the first set).
  std::optional<uint64_t> flops;        // flop_count + 2 x MAC_COUNT
  std::optional<uint64_t> inferences;   // inference_count + INFERENCE_COUNT
  std::optional<uint64_t> model_loads;  // model_load_count + MODEL_LOAD_COUNT
  std::array<std::optional<uint64_t>, kStatusCounters.size()> status;  // + the NDS index
  std::optional<uint64_t> reset_requests;  // reset_req_count (live in sysfs, no datastore part)
  MemCounter device_mem;  // sum of the group's device_mem {total, peak}; present left absent
};
std::vector<LogicalCoreTotals> LogicalCores(const Snapshot& snap, const DeviceSample& device);

// Busy fraction of logical core `k` of `device` between two snapshots: Δbusy / Δsteady time,
// clamped to [0, 1] (a busy total lands when an execution ends, so one window can hold more
// than its own length). Absent when either snapshot lacks the figure, time did not advance, or
// the busy total went down (device replugged, an exit between two reads).
std::optional<double> Utilization(const Snapshot& before, const Snapshot& after, int device,
                                  int logical_core);

}  // namespace neuron
