#pragma once
// The writer side of one per-process datastore (docs/driver-interface.md#datastore): the process's
// slot of the driver's datastore memory, 262144 bytes in the layout of
// core/driver/datastore_layout.h, claimed with ACQUIRE_NEURON_DS (pid 0) on the process's device fd
// and mapped read-write, as the Neuron runtime does. The runtime writes it live; the driver folds
// it into sysfs when the process releases it (RELEASE_NEURON_DS, its last close, or its death).
//
// It writes what the driver's layout defines (the header and the counters) and the EFA traffic
// extension (D15, driver-sim/README.md#deviations). The object area between them belongs to the
// runtime, which keeps its records there in a format of its own (libnrt-sim:
// driver-sim/runtime/records.h); ObjectArea() hands it over.
//
// Thread-safety: counter updates are relaxed atomic stores/adds on aligned u64 words (plain
// `mov`/`lock add` on x86), so several threads may update counters at once and a reader never
// sees a torn value.

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/driver/datastore_layout.h"
#include "driver-sim/driver/efa_traffic_layout.h"

namespace neuron::sim {

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

  // The packed RUNTIME_VERSION device counter (build | minor << 32 | major << 40), as the driver's
  // version word packs it (docs/driver-interface.md#device-counter-indices).
  void SetRuntimeVersion(uint8_t major, uint8_t minor, uint32_t build);

  // The object area (docs/driver-interface.md#datastore-layout): the runtime's, for its records.
  std::span<uint8_t> ObjectArea() const;

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
  uint8_t* base_;  // nds::kSize bytes: the driver's slot (MAP_SHARED) or caller memory
  int efas_ = 0;   // EFA traffic entries, 0 before InitEfaTraffic
};

}  // namespace neuron::sim
