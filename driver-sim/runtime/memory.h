#pragma once
// Device memory (HBM) per logical core by category (docs/runtime.md#load,
// docs/hardware.md#core-parameters, #device-memory), with the capacity limit that makes an
// allocation fail with NRT_RESOURCE, and host memory per device. Every change is reported to a
// listener so the datastore's MEM_USAGE_* counters stay live.
//
// Thread-safe: one mutex; the listener runs under it (keep it short, never call back in).

#include <array>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace neuron::nrt {

// In the datastore's order: MEM_USAGE_{CODE,TENSORS,CONSTANTS,SCRATCHPAD,MISC}_{DEVICE,HOST}.
enum class MemCategory { kCode = 0, kTensors, kConstants, kScratchpad, kMisc };
inline constexpr int kMemCategories = 5;
const char* MemCategoryName(MemCategory c);  // "code", "tensors", ...

// ~96 MB of microcode per physical core once a NEFF is loaded (docs/hardware.md#device-memory); we
// take MiB.
inline constexpr uint64_t kMicrocodeBytesPerPhysicalCore = 96ull << 20;

class MemoryLedger {
 public:
  // (index, category, bytes now in use): index is a logical core for device memory, a device
  // for host memory.
  using Listener = std::function<void(int index, MemCategory, uint64_t)>;

  MemoryLedger(int cores, uint64_t core_limit, Listener device_listener, int devices,
               Listener host_listener);

  // ResourceExhausted when the core's total would pass its limit; the message holds a table of
  // the core's use by category and the limit, for the log.
  absl::Status ChargeDevice(int core, MemCategory cat, uint64_t bytes, std::string_view what);
  void ReleaseDevice(int core, MemCategory cat, uint64_t bytes);
  // Sets a category to an absolute figure (the shared scratchpad is the largest of the core's
  // models), with the same limit check.
  absl::Status SetDevice(int core, MemCategory cat, uint64_t bytes, std::string_view what);
  void ChargeHost(int device, MemCategory cat, uint64_t bytes);
  void ReleaseHost(int device, MemCategory cat, uint64_t bytes);

  uint64_t DeviceUsed(int core) const;
  uint64_t DeviceUsed(int core, MemCategory cat) const;
  uint64_t core_limit() const { return limit_; }
  // Zeroes everything (nrt_close frees all memory), telling the listeners, then stops telling
  // them: tensors freed after nrt_close change nothing.
  void ClearAndDetach();

 private:
  std::string Table(int core, MemCategory cat, uint64_t bytes, std::string_view what) const;

  mutable std::mutex mu_;
  uint64_t limit_;
  std::vector<std::array<uint64_t, kMemCategories>> device_;
  std::vector<std::array<uint64_t, kMemCategories>> host_;
  Listener device_listener_;
  Listener host_listener_;
  bool detached_ = false;
};

}  // namespace neuron::nrt
