#include "core/sample/datastore.h"

#include <fmt/format.h>

#include <algorithm>
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

// A NUL-terminated char[max] as text; bytes outside printable ASCII become '?', because tags end
// up in metric labels and terminal cells.
std::string LoadString(std::span<const std::byte> bytes, size_t offset, size_t max) {
  const char* p = reinterpret_cast<const char*>(bytes.data() + offset);
  size_t n = 0;
  while (n < max && p[n] != '\0') ++n;
  std::string s(p, n);
  for (char& c : s) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return s;
}

bool MagicIs(std::span<const std::byte> bytes, size_t offset, const char (&magic)[4]) {
  return std::memcmp(bytes.data() + offset, magic, 4) == 0;
}

NdsVersion LoadVersion(std::span<const std::byte> bytes, size_t offset) {
  return {Load<uint8_t>(bytes, offset), Load<uint8_t>(bytes, offset + 1),
          Load<uint32_t>(bytes, offset + 4)};
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

void LoadObjectArea(std::span<const std::byte> bytes, std::string_view source, DatastoreRecord* r,
                    std::vector<std::string>* warnings) {
  if (!MagicIs(bytes, nds::kObjectHeaderOffset, nds::kObjectMagic)) return;
  const uint32_t version = Load<uint32_t>(bytes, nds::kObjectHeaderOffset + 4);
  if (version != 1) {
    warnings->push_back(
        fmt::format("{}: object area version {} is not understood (expected 1)", source, version));
    return;
  }
  const size_t pi = nds::kProcessInfoOffset;
  DatastoreProcessInfo info;
  info.framework_type = Load<int8_t>(bytes, pi + nds::kPiFrameworkType);
  info.tag = LoadString(bytes, pi + nds::kPiTag, nds::kPiTagSize);
  info.framework_version = LoadVersion(bytes, pi + nds::kPiFrameworkVersion);
  info.fal_version = LoadVersion(bytes, pi + nds::kPiFalVersion);
  info.runtime_version = LoadVersion(bytes, pi + nds::kPiRuntimeVersion);
  info.long_tag = LoadString(bytes, nds::kProcessTagOffset, nds::kProcessTagSize);
  r->process = std::move(info);

  const uint32_t count = Load<uint32_t>(bytes, nds::kModelCountOffset);
  if (count > static_cast<uint32_t>(nds::kMaxModelRecords)) {
    warnings->push_back(fmt::format("{}: model record count {} exceeds the maximum {}", source,
                                    count, nds::kMaxModelRecords));
    return;
  }
  r->models.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    const size_t at = nds::kModelRecordsOffset + i * nds::kModelRecordSize;
    DatastoreModel m;
    m.model_id = Load<uint32_t>(bytes, at);
    m.model_node_id = Load<uint32_t>(bytes, at + 4);
    m.name = LoadString(bytes, at + 8, 256);
    std::memcpy(m.uuid.data(), bytes.data() + at + 264, m.uuid.size());
    m.nc_index = Load<uint8_t>(bytes, at + 280);
    m.sg_index = Load<uint8_t>(bytes, at + 281);
    const size_t mem = at + nds::kModelNodeInfoSize;
    for (size_t loc = 0; loc < 2; ++loc) {
      for (size_t slot = 0; slot < 12; ++slot) {
        const size_t e = mem + (loc * 12 + slot) * 16;
        m.memory[loc][slot] = {Load<uint64_t>(bytes, e), Load<uint32_t>(bytes, e + 8)};
      }
    }
    r->models.push_back(std::move(m));
  }
}

void LoadHistogram(std::span<const std::byte> bytes, std::string_view source, DatastoreRecord* r,
                   std::vector<std::string>* warnings) {
  if (!MagicIs(bytes, nds::kHistogramOffset, nds::kHistogramMagic)) return;
  const uint32_t n = Load<uint32_t>(bytes, nds::kHistogramOffset + 4);
  if (n == 0 || n > static_cast<uint32_t>(nds::kHistogramBuckets)) {
    warnings->push_back(fmt::format("{}: histogram bucket count {} outside 1..{}", source, n,
                                    nds::kHistogramBuckets));
    return;
  }
  LatencyHistogram h;
  h.num_buckets = static_cast<int>(n);
  LoadU64s(bytes, nds::kHistogramBoundsOffset, h.bounds_us.data(), n);
  const bool ascending = std::is_sorted(h.bounds_us.begin(), h.bounds_us.begin() + n,
                                        [](uint64_t a, uint64_t b) { return a <= b; });
  if (!ascending || h.bounds_us[n - 1] != UINT64_MAX) {
    warnings->push_back(fmt::format(
        "{}: histogram bounds are not ascending with +Inf last; histogram ignored", source));
    return;
  }
  for (int c = 0; c < nds::kMaxCores; ++c) {
    LoadU64s(bytes, nds::HistogramCountOffset(c, 0), h.counts[c].data(), n);
  }
  r->histogram = h;
}

}  // namespace

NdsVersion UnpackVersionWord(uint64_t word) {
  return {static_cast<uint8_t>((word >> 40) & 0xff), static_cast<uint8_t>((word >> 32) & 0xff),
          static_cast<uint32_t>(word & 0xffffffffu)};
}

std::string DatastoreRecord::Tag() const {
  if (process && !process->long_tag.empty()) return process->long_tag;
  if (process && !process->tag.empty()) return process->tag;
  return std::to_string(pid);
}

absl::StatusOr<DatastoreRecord> ParseDatastore(std::span<const std::byte> bytes, int device,
                                               int pid, std::string_view source,
                                               std::vector<std::string>* warnings) {
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
  LoadObjectArea(bytes, source, &r, warnings);
  LoadHistogram(bytes, source, &r, warnings);
  return r;
}

}  // namespace neuron
