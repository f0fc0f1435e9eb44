#include "driver-sim/driver/datastore_writer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <limits>
#include <string>

#include "core/driver/driver_abi.h"

namespace neuron::sim {
namespace {

// Bounded, NUL-terminated copy into a fixed char field (the rest zeroed).
void PutString(uint8_t* dst, size_t field, std::string_view s) {
  std::memset(dst, 0, field);
  std::memcpy(dst, s.data(), std::min(s.size(), field - 1));
}

void PutVersion(uint8_t* dst, NdsVersion v) {
  std::memset(dst, 0, 8);
  dst[0] = v.major;
  dst[1] = v.minor;
  std::memcpy(dst + 4, &v.build, 4);
}

template <typename T>
void Put(uint8_t* dst, T v) {
  std::memcpy(dst, &v, sizeof(T));
}

uint8_t* RecordAt(uint8_t* base, int i) {
  return base + nds::kModelRecordsOffset + static_cast<size_t>(i) * nds::kModelRecordSize;
}

}  // namespace

namespace {

void WriteHeaders(uint8_t* base) {
  std::memcpy(base, nds::kMagic, 4);
  Put<int32_t>(base + 4, nds::kFormatVersion);
  std::memcpy(base + nds::kObjectHeaderOffset, nds::kObjectMagic, 4);
  Put<uint32_t>(base + nds::kObjectHeaderOffset + 4, 1);
}

}  // namespace

absl::StatusOr<std::unique_ptr<DatastoreWriter>> DatastoreWriter::Acquire(int device_fd, int device,
                                                                          pid_t pid) {
  neuron_abi_ds_info info{};
  info.pid = 0;  // claims the caller's slot
  const int rc = ::ioctl(device_fd, NEURON_ABI_ACQUIRE_DS, &info);
  if (rc != 0) {
    return absl::ResourceExhaustedError(fmt::format(
        "nd{}: ACQUIRE_NEURON_DS: {}", device, rc > 0 ? "bad argument" : std::strerror(errno)));
  }
  if (info.size != nds::kSize) {
    return absl::InternalError(fmt::format("nd{}: the driver's datastore is {} bytes, expected {}",
                                           device, info.size, nds::kSize));
  }
  void* map = ::mmap(nullptr, nds::kSize, PROT_READ | PROT_WRITE, MAP_SHARED, device_fd,
                     static_cast<off_t>(info.mmap_offset));
  if (map == MAP_FAILED) {
    return absl::InternalError(
        fmt::format("nd{}: mmap of the datastore: {}", device, std::strerror(errno)));
  }
  auto* base = static_cast<uint8_t*>(map);
  WriteHeaders(base);
  std::unique_ptr<DatastoreWriter> w(new DatastoreWriter(device, pid, base));
  w->device_fd_ = device_fd;
  return w;
}

std::unique_ptr<DatastoreWriter> DatastoreWriter::OverMemory(std::span<uint8_t> memory, int device,
                                                             pid_t pid) {
  WriteHeaders(memory.data());
  return std::unique_ptr<DatastoreWriter>(new DatastoreWriter(device, pid, memory.data()));
}

DatastoreWriter::~DatastoreWriter() {
  if (device_fd_ >= 0 && base_ != nullptr) ::munmap(base_, nds::kSize);
}

void DatastoreWriter::Release() {
  if (device_fd_ < 0 || base_ == nullptr) return;
  neuron_abi_ds_info info{};
  info.pid = 0;  // our own
  if (::ioctl(device_fd_, NEURON_ABI_RELEASE_DS, &info) != 0) {
    // The device may be gone (unplugged); the driver then forgets the slot anyway.
  }
  ::munmap(base_, nds::kSize);
  base_ = nullptr;
}

uint64_t& DatastoreWriter::Word(size_t offset) const {
  return *reinterpret_cast<uint64_t*>(base_ + offset);
}

absl::Status DatastoreWriter::SetCoreCounter(int core, int index, uint64_t value) {
  const std::optional<size_t> off = nds::CoreCounterOffset(core, index);
  if (!off) {
    return absl::InvalidArgumentError(
        fmt::format("no datastore slot for core {} index {}", core, index));
  }
  std::atomic_ref<uint64_t>(Word(*off)).store(value, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status DatastoreWriter::AddCoreCounter(int core, int index, uint64_t delta) {
  const std::optional<size_t> off = nds::CoreCounterOffset(core, index);
  if (!off) {
    return absl::InvalidArgumentError(
        fmt::format("no datastore slot for core {} index {}", core, index));
  }
  std::atomic_ref<uint64_t>(Word(*off)).fetch_add(delta, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> DatastoreWriter::CoreCounter(int core, int index) const {
  const std::optional<size_t> off = nds::CoreCounterOffset(core, index);
  if (!off) {
    return absl::InvalidArgumentError(
        fmt::format("no datastore slot for core {} index {}", core, index));
  }
  return std::atomic_ref<uint64_t>(Word(*off)).load(std::memory_order_relaxed);
}

absl::Status DatastoreWriter::SetDeviceCounter(int index, uint64_t value) {
  if (index < 0 || index >= nds::kDeviceCounterCount) {
    return absl::InvalidArgumentError(
        fmt::format("device counter index {} is outside 0-30", index));
  }
  std::atomic_ref<uint64_t>(Word(nds::DeviceCounterOffset(index)))
      .store(value, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status DatastoreWriter::AddDeviceCounter(int index, uint64_t delta) {
  if (index < 0 || index >= nds::kDeviceCounterCount) {
    return absl::InvalidArgumentError(
        fmt::format("device counter index {} is outside 0-30", index));
  }
  std::atomic_ref<uint64_t>(Word(nds::DeviceCounterOffset(index)))
      .fetch_add(delta, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> DatastoreWriter::DeviceCounter(int index) const {
  if (index < 0 || index >= nds::kDeviceCounterCount) {
    return absl::InvalidArgumentError(
        fmt::format("device counter index {} is outside 0-30", index));
  }
  return std::atomic_ref<uint64_t>(Word(nds::DeviceCounterOffset(index)))
      .load(std::memory_order_relaxed);
}

void DatastoreWriter::SetProcessInfo(std::string_view tag, NdsVersion runtime,
                                     int8_t framework_type, NdsVersion framework, NdsVersion fal) {
  uint8_t* pi = base_ + nds::kProcessInfoOffset;
  std::memset(pi, 0, nds::kProcessInfoSize);
  Put<int8_t>(pi + nds::kPiFrameworkType, framework_type);
  PutString(pi + nds::kPiTag, nds::kPiTagSize, tag);
  PutVersion(pi + nds::kPiFrameworkVersion, framework);
  PutVersion(pi + nds::kPiFalVersion, fal);
  PutVersion(pi + nds::kPiRuntimeVersion, runtime);
  const uint64_t packed =
      uint64_t{runtime.build} | (uint64_t{runtime.minor} << 32) | (uint64_t{runtime.major} << 40);
  (void)SetDeviceCounter(nds::kRuntimeVersion, packed);
}

void DatastoreWriter::SetProcessTag(std::string_view tag) {
  PutString(base_ + nds::kProcessTagOffset, nds::kProcessTagSize, tag);
}

int DatastoreWriter::ModelCount() const {
  return static_cast<int>(
      std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(base_ + nds::kModelCountOffset))
          .load(std::memory_order_acquire));
}

absl::StatusOr<int> DatastoreWriter::AddModel(const NdsModel& m) {
  const int i = ModelCount();
  if (i >= nds::kMaxModelRecords) {
    return absl::ResourceExhaustedError(fmt::format("nd{} pid {}: all {} model records are in use",
                                                    device_, pid_, nds::kMaxModelRecords));
  }
  uint8_t* r = RecordAt(base_, i);
  std::memset(r, 0, nds::kModelRecordSize);
  Put<uint32_t>(r + 0, m.model_id);
  Put<uint32_t>(r + 4, m.model_node_id);
  PutString(r + 8, 256, m.name);
  std::memcpy(r + 264, m.uuid.data(), 16);
  r[280] = m.nc_index;
  r[281] = m.sg_index;
  uint8_t* mem = r + nds::kModelNodeInfoSize;
  for (size_t loc = 0; loc < 2; ++loc) {
    for (size_t slot = 0; slot < kNdsMemSlots; ++slot) {
      uint8_t* u = mem + (loc * kNdsMemSlots + slot) * 16;
      Put<uint64_t>(u, m.memory[loc][slot].total_size);
      Put<uint32_t>(u + 8, m.memory[loc][slot].chunk_count);
    }
  }
  // Publish the record only after its bytes are in place.
  std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(base_ + nds::kModelCountOffset))
      .store(static_cast<uint32_t>(i + 1), std::memory_order_release);
  return i;
}

absl::Status DatastoreWriter::RemoveModel(uint32_t model_id, uint32_t model_node_id) {
  const int n = ModelCount();
  for (int i = 0; i < n; ++i) {
    uint8_t* r = RecordAt(base_, i);
    uint32_t id = 0, node = 0;
    std::memcpy(&id, r, 4);
    std::memcpy(&node, r + 4, 4);
    if (id != model_id || node != model_node_id) continue;
    if (i != n - 1) std::memcpy(r, RecordAt(base_, n - 1), nds::kModelRecordSize);
    std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(base_ + nds::kModelCountOffset))
        .store(static_cast<uint32_t>(n - 1), std::memory_order_release);
    std::memset(RecordAt(base_, n - 1), 0, nds::kModelRecordSize);
    return absl::OkStatus();
  }
  return absl::NotFoundError(
      fmt::format("nd{} pid {}: no model record {}/{}", device_, pid_, model_id, model_node_id));
}

absl::Status DatastoreWriter::InitHistogram(std::span<const uint64_t> finite_bounds) {
  if (finite_bounds.size() + 1 > static_cast<size_t>(nds::kHistogramBuckets)) {
    return absl::InvalidArgumentError(fmt::format("{} latency bounds exceed the {} buckets",
                                                  finite_bounds.size(), nds::kHistogramBuckets));
  }
  if (!std::is_sorted(finite_bounds.begin(), finite_bounds.end()) ||
      std::adjacent_find(finite_bounds.begin(), finite_bounds.end()) != finite_bounds.end()) {
    return absl::InvalidArgumentError("latency bounds must be strictly ascending");
  }
  const int used = static_cast<int>(finite_bounds.size()) + 1;
  for (int b = 0; b < nds::kHistogramBuckets; ++b) {
    uint64_t bound = 0;
    if (b < used - 1) bound = finite_bounds[b];
    if (b == used - 1) bound = std::numeric_limits<uint64_t>::max();
    Word(nds::kHistogramBoundsOffset + b * 8) = bound;
  }
  std::memset(base_ + nds::kHistogramCountsOffset, 0,
              nds::HistogramCountOffset(nds::kMaxCores, 0) - nds::kHistogramCountsOffset);
  Put<uint32_t>(base_ + nds::kHistogramOffset + 4, static_cast<uint32_t>(used));
  // Magic last, with release order: a reader that sees it sees the bounds.
  uint32_t magic = 0;
  std::memcpy(&magic, nds::kHistogramMagic, 4);
  std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(base_ + nds::kHistogramOffset))
      .store(magic, std::memory_order_release);
  buckets_ = used;
  return absl::OkStatus();
}

void DatastoreWriter::ObserveLatency(int core, uint64_t micros) {
  if (buckets_ == 0 || core < 0 || core >= nds::kMaxCores) return;
  int b = 0;
  while (b < buckets_ - 1 && micros > Word(nds::kHistogramBoundsOffset + b * 8)) ++b;
  std::atomic_ref<uint64_t>(Word(nds::HistogramCountOffset(core, b)))
      .fetch_add(1, std::memory_order_relaxed);
}

uint64_t* DatastoreWriter::CoreCounterWord(int core, int index) const {
  const std::optional<size_t> off = nds::CoreCounterOffset(core, index);
  return off ? &Word(*off) : nullptr;
}

absl::Status DatastoreWriter::InitEfaTraffic(int efa_count) {
  if (efa_count < 0 || efa_count > nds::kMaxEfas) {
    return absl::InvalidArgumentError(
        fmt::format("{} EFAs exceed the datastore's {} traffic entries", efa_count, nds::kMaxEfas));
  }
  Put<uint32_t>(base_ + nds::kEfaTrafficOffset + 4, static_cast<uint32_t>(efa_count));
  // Magic last, with release order: a reader that sees it sees the count.
  uint32_t magic = 0;
  std::memcpy(&magic, nds::kEfaTrafficMagic, 4);
  std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(base_ + nds::kEfaTrafficOffset))
      .store(magic, std::memory_order_release);
  efas_ = efa_count;
  return absl::OkStatus();
}

void DatastoreWriter::AddEfaTraffic(int efa, int field, uint64_t delta) {
  if (efa < 0 || efa >= efas_ || field < 0 || field >= nds::kEfaTrafficFields) return;
  std::atomic_ref<uint64_t>(Word(nds::EfaTrafficFieldOffset(efa, field)))
      .fetch_add(delta, std::memory_order_relaxed);
}

uint64_t DatastoreWriter::EfaTraffic(int efa, int field) const {
  if (efa < 0 || efa >= nds::kMaxEfas || field < 0 || field >= nds::kEfaTrafficFields) return 0;
  return std::atomic_ref<uint64_t>(Word(nds::EfaTrafficFieldOffset(efa, field)))
      .load(std::memory_order_relaxed);
}

}  // namespace neuron::sim
