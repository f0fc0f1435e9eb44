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
#include <string>

#include "core/driver/driver_abi.h"

namespace neuron::sim {
namespace {

template <typename T>
void Put(uint8_t* dst, T v) {
  std::memcpy(dst, &v, sizeof(T));
}

void WriteHeaders(uint8_t* base) {
  std::memcpy(base, nds::kMagic, 4);
  Put<int32_t>(base + 4, nds::kFormatVersion);
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

void DatastoreWriter::SetRuntimeVersion(uint8_t major, uint8_t minor, uint32_t build) {
  const uint64_t packed = uint64_t{build} | (uint64_t{minor} << 32) | (uint64_t{major} << 40);
  (void)SetDeviceCounter(nds::kRuntimeVersion, packed);
}

std::span<uint8_t> DatastoreWriter::ObjectArea() const {
  return {base_ + nds::kObjectAreaOffset, nds::kObjectAreaEnd - nds::kObjectAreaOffset};
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
