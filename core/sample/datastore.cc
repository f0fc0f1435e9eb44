#include "core/sample/datastore.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>

namespace neuron {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the datastore holds little-endian values; a big-endian host needs byte swaps");

template <typename T>
T Load(std::span<const std::byte> bytes, size_t offset) {
  T v;
  std::memcpy(&v, bytes.data() + offset, sizeof(T));
  return v;
}

void LoadU64s(std::span<const std::byte> bytes, size_t offset, uint64_t* out, size_t n) {
  std::memcpy(out, bytes.data() + offset, n * sizeof(uint64_t));
}

bool MagicIs(std::span<const std::byte> bytes, size_t offset, const char (&magic)[4]) {
  return std::memcmp(bytes.data() + offset, magic, 4) == 0;
}

void LoadCoreCounters(std::span<const std::byte> bytes, DatastoreRecord* r) {
  for (int slot = 0; slot < nds::kMaxCores; ++slot) {
    uint64_t* out = r->core_counters[slot].data();
    if (slot < 4) {
      // Original section (indices 0-30), then the extended entries (31-94).
      LoadU64s(bytes, *nds::CoreCounterOffset(slot, 0), out, nds::kOriginalCoreCounters);
      LoadU64s(bytes, *nds::CoreCounterOffset(slot, nds::kOriginalCoreCounters),
               out + nds::kOriginalCoreCounters,
               nds::kCoreCounterCount - nds::kOriginalCoreCounters);
    } else {
      LoadU64s(bytes, *nds::CoreCounterOffset(slot, 0), out, nds::kCoreCounterCount);
    }
  }
}

}  // namespace

NdsVersion UnpackVersionWord(uint64_t word) {
  return {static_cast<uint8_t>((word >> 40) & 0xff), static_cast<uint8_t>((word >> 32) & 0xff),
          static_cast<uint32_t>(word & 0xffffffffu)};
}

absl::StatusOr<DatastoreRecord> ParseDatastore(std::span<const std::byte> bytes, int device,
                                               int pid, std::string_view source) {
  if (bytes.size() != nds::kSize) {
    return absl::DataLossError(
        fmt::format("{}: size {} bytes, expected {}", source, bytes.size(), nds::kSize));
  }
  if (!MagicIs(bytes, 0, nds::kMagic)) {
    return absl::DataLossError(fmt::format("{}: bad magic (expected \"nds\\0\")", source));
  }
  DatastoreRecord r;
  r.device = device;
  r.pid = pid;
  r.source = std::string(source);
  r.format_version = Load<int32_t>(bytes, 4);
  LoadU64s(bytes, nds::kDeviceCountersOffset, r.device_counters.data(), nds::kDeviceCounterCount);
  LoadCoreCounters(bytes, &r);
  return r;
}

}  // namespace neuron
