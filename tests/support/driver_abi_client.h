#pragma once
// A monitor's view of one process's datastore, read the way docs/driver-interface.md says a
// monitor must (open the device read-only, ACQUIRE_NEURON_DS with the PID, mmap the slot
// read-only), for tests that check what a runtime wrote. The calling process must run under
// the simulated driver (or on a real node).

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "core/base/unique_fd.h"
#include "core/driver/datastore_layout.h"
#include "core/driver/driver_abi.h"

namespace neuron::testing {

// `pid`'s datastore slot mapped read-only for as long as the view lives. The mapping outlives
// the owner's release: the driver then zeroes the slot's memory, which the view goes on reading
// (docs/driver-interface.md#abi-reading-datastore), so a test can watch that happen. Not
// thread-safe.
class DatastoreView {
 public:
  // nullptr when `pid` has no datastore on the device node `node` (ACQUIRE gives ENOENT).
  static std::unique_ptr<DatastoreView> Open(const std::filesystem::path& node, pid_t pid) {
    // The fd goes on return: the mapping keeps the open alive, as in the kernel.
    const UniqueFd fd(::open(node.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return nullptr;
    neuron_abi_ds_info info{};
    info.pid = pid;
    void* m = MAP_FAILED;
    if (::ioctl(fd.get(), NEURON_ABI_ACQUIRE_DS, &info) == 0) {
      m = ::mmap(nullptr, info.size, PROT_READ, MAP_SHARED, fd.get(),
                 static_cast<off_t>(info.mmap_offset));
    }
    if (m == MAP_FAILED) return nullptr;
    return std::unique_ptr<DatastoreView>(
        new DatastoreView(static_cast<const uint8_t*>(m), info.size));
  }
  ~DatastoreView() { ::munmap(const_cast<uint8_t*>(base_), size_); }
  DatastoreView(const DatastoreView&) = delete;
  DatastoreView& operator=(const DatastoreView&) = delete;

  std::vector<uint8_t> Bytes() const { return {base_, base_ + size_}; }
  // One u64 as the runtime stores it (a single aligned store); nullopt past the end.
  std::optional<uint64_t> Word(size_t offset) const {
    if (offset + 8 > size_) return std::nullopt;
    return __atomic_load_n(reinterpret_cast<const uint64_t*>(base_ + offset), __ATOMIC_RELAXED);
  }

 private:
  DatastoreView(const uint8_t* base, size_t size) : base_(base), size_(size) {}
  const uint8_t* base_;
  size_t size_;
};

// Opens the device node `node` as a runtime does (O_RDWR: the caller attaches) and claims the
// caller's datastore slot (ACQUIRE_NEURON_DS with pid 0) without mapping it, for tests that
// need a process the driver counts as a runtime. Returns the fd, or an empty one with errno
// set. The process's last close of the device (or its death) releases the slot.
inline UniqueFd OpenAndClaimDatastore(const std::filesystem::path& node) {
  UniqueFd fd(::open(node.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd) return fd;
  neuron_abi_ds_info info{};
  info.pid = 0;
  if (::ioctl(fd.get(), NEURON_ABI_ACQUIRE_DS, &info) != 0) {
    const int err = errno;
    fd.Reset();
    errno = err;
  }
  return fd;
}

// The bytes of `pid`'s datastore on the device node `node`; nullopt when it has none.
inline std::optional<std::vector<uint8_t>> ReadDatastoreBytes(const std::filesystem::path& node,
                                                              pid_t pid) {
  const std::unique_ptr<DatastoreView> view = DatastoreView::Open(node, pid);
  if (!view) return std::nullopt;
  return view->Bytes();
}

// One u64 of `pid`'s datastore; nullopt without a datastore.
inline std::optional<uint64_t> ReadDatastoreWord(const std::filesystem::path& node, pid_t pid,
                                                 size_t offset) {
  const std::unique_ptr<DatastoreView> view = DatastoreView::Open(node, pid);
  if (!view) return std::nullopt;
  return view->Word(offset);
}

}  // namespace neuron::testing
