#pragma once
// The writer side of one per-process datastore (docs/driver-interface.md#datastore): the process's
// slot of the driver's datastore memory, 262144 bytes in the layout of
// core/driver/datastore_layout.h, claimed with ACQUIRE_NEURON_DS (pid 0) on the process's device fd
// and mapped read-write, as the Neuron runtime does. The runtime writes it live; the driver folds
// it into sysfs when the process releases it (RELEASE_NEURON_DS, its last close, or its death).
// driver-sim/README.md documents the object area and the histogram extension.
//
// Thread-safety: counter and histogram updates are relaxed atomic stores/adds on aligned u64
// words (plain `mov`/`lock add` on x86), so several threads may update counters at once and a
// reader never sees a torn value. The object-area setters (SetProcessInfo, SetProcessTag,
// AddModel, RemoveModel, InitHistogram) must not run concurrently with each other.

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/driver/datastore_layout.h"

namespace neuron::sim {

// {u8 major; u8 minor; u32 build} as the process info record stores versions.
struct NdsVersion {
  uint8_t major = 0;
  uint8_t minor = 0;
  uint32_t build = 0;
};

// Model memory locations (first index of the node-memory record); our order follows
// nrt_tensor_placement_t (DEVICE = 0, HOST = 1).
enum class NdsMemLocation { kDevice = 0, kHost = 1 };
// Model memory slots (second index): 0 CODE, 1 TENSORS, 2 CONSTANTS, 3 SCRATCHPAD, 4 MISC.
inline constexpr int kNdsMemSlots = 12;

struct NdsModel {
  uint32_t model_id = 0;
  uint32_t model_node_id = 0;
  std::string_view name;  // truncated to 255 bytes
  std::array<uint8_t, 16> uuid{};
  uint8_t nc_index = 0;  // logical core within the device
  uint8_t sg_index = 0;
  struct Usage {
    uint64_t total_size = 0;
    uint32_t chunk_count = 0;
  };
  std::array<std::array<Usage, kNdsMemSlots>, 2> memory{};  // [location][slot]
};

// The proposed latency buckets of docs/metrics.md#executions-errors-latency, in microseconds (+Inf
// is added).
inline constexpr std::array<uint64_t, 14> kDefaultLatencyBoundsMicros{
    500,    1000,   2500,   5000,    10000,   25000,   50000,
    100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000};

class DatastoreWriter {
 public:
  // Claims the caller's slot on `device_fd` (an open /dev/neuronN; the fd stays the caller's
  // and must outlive the writer) and maps it; the headers are written at once.
  static absl::StatusOr<std::unique_ptr<DatastoreWriter>> Acquire(int device_fd, int device,
                                                                  pid_t pid);
  // A writer over caller-owned memory of nds::kSize bytes, for tests and benchmarks that need a
  // datastore's bytes without a driver.
  static std::unique_ptr<DatastoreWriter> OverMemory(std::span<uint8_t> memory, int device,
                                                     pid_t pid);
  ~DatastoreWriter();  // unmaps (without releasing: a dying process's slot is the driver's)
  DatastoreWriter(const DatastoreWriter&) = delete;
  DatastoreWriter& operator=(const DatastoreWriter&) = delete;

  int device() const { return device_; }
  pid_t pid() const { return pid_; }

  // Core counters by NC index (nds::CoreCounter), `core` being the counter set: the physical core
  // within the device (libnrt's pnc_index). InvalidArgument where the driver would read 0
  // (core >= 16, index >= 95).
  absl::Status SetCoreCounter(int core, int index, uint64_t value);
  absl::Status AddCoreCounter(int core, int index, uint64_t delta);
  absl::StatusOr<uint64_t> CoreCounter(int core, int index) const;
  // Device counters by ND index 0-30 (nds::DeviceCounter).
  absl::Status SetDeviceCounter(int index, uint64_t value);
  absl::Status AddDeviceCounter(int index, uint64_t delta);
  absl::StatusOr<uint64_t> DeviceCounter(int index) const;

  // The 60-byte process info record (tag truncated to 31 bytes) and the RUNTIME_VERSION device
  // counter, packed as the driver's version word (build | minor << 32 | major << 40).
  void SetProcessInfo(std::string_view tag, NdsVersion runtime, int8_t framework_type,
                      NdsVersion framework = {}, NdsVersion fal = {});
  // The extended 256-byte tag (NEURON_PROCESS_TAG), truncated to 255 bytes.
  void SetProcessTag(std::string_view tag);

  // Appends a model record; ResourceExhausted beyond nds::kMaxModelRecords. Returns its slot.
  absl::StatusOr<int> AddModel(const NdsModel& model);
  // Removes the record of (model_id, model_node_id) by moving the last record into its place.
  absl::Status RemoveModel(uint32_t model_id, uint32_t model_node_id);
  int ModelCount() const;

  // D13 histogram (driver-sim/README.md#deviations): `finite_bounds` ascending, at most
  // nds::kHistogramBuckets - 1 of them; +Inf is appended. Resets the counts. ObserveLatency is a
  // no-op before InitHistogram.
  absl::Status InitHistogram(std::span<const uint64_t> finite_bounds);
  void ObserveLatency(int core, uint64_t micros);

  // The word behind core counter `index` of `core` for callers that update it on a hot path
  // through std::atomic_ref (relaxed); nullptr where the driver would read 0.
  uint64_t* CoreCounterWord(int core, int index) const;

  // RELEASE_NEURON_DS (what nrt_close does): the driver folds the counters into sysfs and zeroes
  // the slot; the mapping goes. Idempotent; counter updates after it must not happen.
  void Release();

  // Simulator extension D15 (driver-sim/README.md#deviations): EFA traffic of this process per EFA
  // index (core/driver/datastore_layout.h). InitEfaTraffic writes the magic and the EFA count (at
  // most nds::kMaxEfas); AddEfaTraffic adds to one field (nds::EfaTrafficField) and is a no-op
  // before InitEfaTraffic or for an index outside the count.
  absl::Status InitEfaTraffic(int efa_count);
  void AddEfaTraffic(int efa, int field, uint64_t delta);
  uint64_t EfaTraffic(int efa, int field) const;

 private:
  DatastoreWriter(int device, pid_t pid, uint8_t* base) : device_(device), pid_(pid), base_(base) {}
  uint64_t& Word(size_t offset) const;

  int device_fd_ = -1;  // -1 over caller memory
  int device_;
  pid_t pid_;
  uint8_t* base_;    // nds::kSize bytes: the driver's slot (MAP_SHARED) or caller memory
  int buckets_ = 0;  // histogram buckets in use, 0 before InitHistogram
  int efas_ = 0;     // EFA traffic entries, 0 before InitEfaTraffic
};

}  // namespace neuron::sim
