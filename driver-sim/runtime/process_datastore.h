#pragma once
// One datastore of this process as libnrt-sim keeps it (docs/driver-interface.md#datastore): the
// driver's slot, whose counters sim::DatastoreWriter writes in the driver's layout, and in its
// object area the process and model records in libnrt-sim's private format (records.h), which
// other processes read through libnrt.so.1's nds_* functions only.
//
// Thread-safety: the counter words (CoreCounterWord, AddEfaTraffic) may be updated from any
// thread; the record setters must not run concurrently with each other (Accounting serialises
// them).

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "driver-sim/driver/datastore_writer.h"
#include "driver-sim/runtime/records.h"

namespace neuron::nrt {

// {u8 major; u8 minor; u32 build} as the process info record stores versions.
struct NdsVersion {
  uint8_t major = 0;
  uint8_t minor = 0;
  uint32_t build = 0;
};

// Model memory slots (second index of NdsModel::memory): 0 CODE, 1 TENSORS, 2 CONSTANTS,
// 3 SCRATCHPAD, 4 MISC; locations (first index): our order follows nrt_tensor_placement_t
// (DEVICE = 0, HOST = 1).
inline constexpr int kNdsMemSlots = 12;

struct NdsModel {
  uint32_t model_id = 0;
  uint32_t model_node_id = 0;
  std::string_view name;  // truncated to 255 bytes
  std::array<uint8_t, 16> uuid{};
  uint8_t nc_index = 0;  // the core within the device
  uint8_t sg_index = 0;
  struct Usage {
    uint64_t total_size = 0;
    uint32_t chunk_count = 0;
  };
  std::array<std::array<Usage, kNdsMemSlots>, 2> memory{};  // [location][slot]
};

class ProcessDatastore {
 public:
  // Claims the caller's slot on `device_fd` (an open /dev/neuronN that must outlive this),
  // maps it and writes its headers.
  static absl::StatusOr<std::unique_ptr<ProcessDatastore>> Acquire(int device_fd, int device,
                                                                   pid_t pid);

  sim::DatastoreWriter& counters() { return *counters_; }
  const sim::DatastoreWriter& counters() const { return *counters_; }

  // The process info record (tag truncated to 31 bytes) and the RUNTIME_VERSION device counter.
  void SetProcessInfo(std::string_view tag, NdsVersion runtime, int8_t framework_type,
                      NdsVersion framework = {}, NdsVersion fal = {});
  // The extended 256-byte tag (NEURON_PROCESS_TAG), truncated to 255 bytes.
  void SetProcessTag(std::string_view tag);
  // Appends a model node record; ResourceExhausted when all are in use.
  absl::Status AddModel(const NdsModel& model);
  // Removes the record of (model_id, model_node_id).
  absl::Status RemoveModel(uint32_t model_id, uint32_t model_node_id);

  // The counter side, as sim::DatastoreWriter has it.
  uint64_t* CoreCounterWord(int core, int index) const {
    return counters_->CoreCounterWord(core, index);
  }
  absl::Status SetDeviceCounter(int index, uint64_t value) {
    return counters_->SetDeviceCounter(index, value);
  }
  absl::Status InitEfaTraffic(int efa_count) { return counters_->InitEfaTraffic(efa_count); }
  void AddEfaTraffic(int efa, int field, uint64_t delta) {
    counters_->AddEfaTraffic(efa, field, delta);
  }
  // RELEASE_NEURON_DS (nrt_close); records and counters must not be touched after it.
  void Release() { counters_->Release(); }

 private:
  explicit ProcessDatastore(std::unique_ptr<sim::DatastoreWriter> counters)
      : counters_(std::move(counters)), records_(counters_->ObjectArea()) {}

  std::unique_ptr<sim::DatastoreWriter> counters_;
  records::Writer records_;
};

}  // namespace neuron::nrt
