// C API glue: tensors and tensor sets (docs/runtime.md#public-functions). Tensor bytes live in host
// memory mapped on demand (MAP_NORESERVE), so a large device tensor costs nothing until it is
// written; device tensors are charged to their core's HBM, HOST tensors to the host counters.
#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "driver-sim/runtime/log.h"
#include "driver-sim/runtime/runtime.h"
#include "nrt/nrt.h"

using neuron::nrt::CurrentRuntime;
using neuron::nrt::MemCategory;
using neuron::nrt::NoRuntimeStatus;
using neuron::nrt::Runtime;
using neuron::nrt::Storage;
using neuron::nrt::TensorSet;

namespace neuron::nrt {

Storage::~Storage() {
  if (ledger && charged > 0) {
    if (device) {
      ledger->ReleaseDevice(index, MemCategory::kTensors, charged);
    } else {
      ledger->ReleaseHost(index, MemCategory::kTensors, charged);
    }
  }
  if (owned && data != nullptr) ::munmap(data, size);
}

nrt_tensor_t* TensorSet::Find(const char* name) const {
  for (const auto& [n, t] : items) {
    if (n == name) return t;
  }
  return nullptr;
}

}  // namespace neuron::nrt

namespace {

constexpr size_t kHostPlacementMax = 4u << 20;  // HOST placement is deprecated, at most 4 MB

bool Valid(const nrt_tensor_t* t) { return t != nullptr && t->magic == neuron::nrt::kTensorMagic; }

uint8_t* Bytes(const nrt_tensor_t* t) { return neuron::nrt::TensorBytes(t); }

bool InRange(const nrt_tensor_t* t, uint64_t offset, size_t size) {
  return offset <= t->size && size <= t->size - offset;
}

NRT_STATUS Invalid(const std::string& msg) {
  neuron::nrt::Log()->error("{}", msg);
  neuron::nrt::SetLastError(msg);
  return NRT_INVALID;
}

}  // namespace

extern "C" {

NRT_STATUS nrt_tensor_allocate(nrt_tensor_placement_t placement, int vnc, size_t size,
                               const char* name, nrt_tensor_t** tensor) {
  Runtime* rt = CurrentRuntime();
  if (rt == nullptr) return NoRuntimeStatus();
  if (tensor == nullptr || size == 0) return Invalid("nrt_tensor_allocate NULL tensor or size 0");
  auto storage = std::make_shared<Storage>();
  storage->ledger = rt->ledger();
  switch (placement) {
    case NRT_TENSOR_PLACEMENT_DEVICE: {
      if (vnc < 0 || vnc >= rt->visible()) {
        return Invalid(
            fmt::format("nrt_tensor_allocate NeuronCore {} is not one of the {} "
                        "visible",
                        vnc, rt->visible()));
      }
      const absl::Status s =
          rt->ledger()->ChargeDevice(vnc, MemCategory::kTensors, size,
                                     fmt::format("tensor \"{}\"", name != nullptr ? name : ""));
      if (!s.ok()) {
        neuron::nrt::Log()->error("nrt_tensor_allocate {}", std::string{s.message()});
        rt->accounting().CountStatus(vnc, NRT_RESOURCE);
        return NRT_RESOURCE;
      }
      storage->device = true;
      storage->index = vnc;
      storage->charged = size;
      break;
    }
    case NRT_TENSOR_PLACEMENT_HOST:
      if (size > kHostPlacementMax) {
        return Invalid(
            fmt::format("nrt_tensor_allocate HOST tensors are limited to {} bytes; "
                        "use NRT_TENSOR_PLACEMENT_VIRTUAL",
                        kHostPlacementMax));
      }
      storage->index = rt->Loc(0).device;
      storage->charged = size;
      rt->ledger()->ChargeHost(storage->index, MemCategory::kTensors, size);
      vnc = -1;
      break;
    case NRT_TENSOR_PLACEMENT_VIRTUAL:
      vnc = -1;
      break;
    default:
      return Invalid(
          fmt::format("nrt_tensor_allocate unknown placement {}", static_cast<int>(placement)));
  }
  void* map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) return NRT_RESOURCE;  // the storage's destructor undoes the charge
  storage->data = static_cast<uint8_t*>(map);
  storage->size = size;
  storage->owned = true;
  auto* t = new nrt_tensor_t();
  t->name = name != nullptr ? name : "";
  t->placement = placement;
  t->vnc = vnc;
  t->storage = std::move(storage);
  t->size = size;
  *tensor = t;
  return NRT_SUCCESS;
}

void nrt_tensor_free(nrt_tensor_t** tensor) {
  if (tensor == nullptr || !Valid(*tensor)) return;
  (*tensor)->magic = 0;
  delete *tensor;
  *tensor = nullptr;
}

NRT_STATUS nrt_tensor_read(const nrt_tensor_t* tensor, void* buf, size_t offset, size_t size) {
  if (CurrentRuntime() == nullptr) return NoRuntimeStatus();
  if (!Valid(tensor) || buf == nullptr || Bytes(tensor) == nullptr) return NRT_INVALID;
  if (!InRange(tensor, offset, size)) return Invalid("nrt_tensor_read beyond the tensor's end");
  std::memcpy(buf, Bytes(tensor) + offset, size);
  return NRT_SUCCESS;
}

NRT_STATUS nrt_tensor_write(nrt_tensor_t* tensor, const void* buf, size_t offset, size_t size) {
  if (CurrentRuntime() == nullptr) return NoRuntimeStatus();
  if (!Valid(tensor) || buf == nullptr || Bytes(tensor) == nullptr) return NRT_INVALID;
  if (!InRange(tensor, offset, size)) return Invalid("nrt_tensor_write beyond the tensor's end");
  std::memcpy(Bytes(tensor) + offset, buf, size);
  return NRT_SUCCESS;
}

NRT_STATUS nrt_tensor_read_batch(const nrt_tensor_batch_t* batches, uint64_t num_batches,
                                 bool unsafe) {
  (void)unsafe;
  if (batches == nullptr && num_batches > 0) return NRT_INVALID;
  for (uint64_t b = 0; b < num_batches; ++b) {
    for (uint32_t i = 0; i < batches[b].num_ops; ++i) {
      const nrt_tensor_batch_op_t& op = batches[b].ops[i];
      if (NRT_STATUS s = nrt_tensor_read(batches[b].tensor, op.buffer, op.offset, op.size);
          s != NRT_SUCCESS) {
        return s;
      }
    }
  }
  return NRT_SUCCESS;
}

NRT_STATUS nrt_tensor_write_batch(const nrt_tensor_batch_t* batches, uint64_t num_batches,
                                  bool unsafe) {
  (void)unsafe;
  if (batches == nullptr && num_batches > 0) return NRT_INVALID;
  for (uint64_t b = 0; b < num_batches; ++b) {
    for (uint32_t i = 0; i < batches[b].num_ops; ++i) {
      const nrt_tensor_batch_op_t& op = batches[b].ops[i];
      if (NRT_STATUS s = nrt_tensor_write(const_cast<nrt_tensor_t*>(batches[b].tensor), op.buffer,
                                          op.offset, op.size);
          s != NRT_SUCCESS) {
        return s;
      }
    }
  }
  return NRT_SUCCESS;
}

NRT_STATUS nrt_tensor_copy(const nrt_tensor_t* src, size_t src_offset, nrt_tensor_t* dst,
                           size_t dst_offset, size_t size) {
  if (CurrentRuntime() == nullptr) return NoRuntimeStatus();
  if (!Valid(src) || !Valid(dst) || Bytes(src) == nullptr || Bytes(dst) == nullptr) {
    return NRT_INVALID;
  }
  if (src->placement == NRT_TENSOR_PLACEMENT_DEVICE &&
      dst->placement == NRT_TENSOR_PLACEMENT_DEVICE && src->vnc != dst->vnc) {
    return Invalid(
        fmt::format("nrt_tensor_copy device tensors on NeuronCores {} and {}: a "
                    "device-to-device copy must stay on one core",
                    src->vnc, dst->vnc));
  }
  if (!InRange(src, src_offset, size) || !InRange(dst, dst_offset, size)) {
    return Invalid("nrt_tensor_copy beyond a tensor's end");
  }
  std::memmove(Bytes(dst) + dst_offset, Bytes(src) + src_offset, size);
  return NRT_SUCCESS;
}

size_t nrt_tensor_get_size(const nrt_tensor_t* tensor) { return Valid(tensor) ? tensor->size : 0; }

NRT_STATUS nrt_tensor_memset(nrt_tensor_t* tensor, uint64_t offset, int value, size_t size) {
  if (CurrentRuntime() == nullptr) return NoRuntimeStatus();
  if (!Valid(tensor) || Bytes(tensor) == nullptr) return NRT_INVALID;
  if (!InRange(tensor, offset, size)) return Invalid("nrt_tensor_memset beyond the tensor's end");
  std::memset(Bytes(tensor) + offset, value, size);
  return NRT_SUCCESS;
}

NRT_STATUS nrt_tensor_allocate_empty(const char* name, nrt_tensor_t** tensor) {
  if (CurrentRuntime() == nullptr) return NoRuntimeStatus();
  if (tensor == nullptr) return NRT_INVALID;
  auto* t = new nrt_tensor_t();
  t->name = name != nullptr ? name : "";
  *tensor = t;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_tensor_attach_buffer(nrt_tensor_t* tensor, void* buffer, size_t size) {
  if (CurrentRuntime() == nullptr) return NoRuntimeStatus();
  if (!Valid(tensor) || buffer == nullptr) return NRT_INVALID;
  auto storage = std::make_shared<Storage>();
  storage->data = static_cast<uint8_t*>(buffer);
  storage->size = size;
  tensor->storage = std::move(storage);  // frees what the tensor owned before
  tensor->placement = NRT_TENSOR_PLACEMENT_VIRTUAL;
  tensor->vnc = -1;
  tensor->offset = 0;
  tensor->size = size;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_tensor_allocate_slice(const nrt_tensor_t* source, size_t offset, size_t size,
                                     const char* name, nrt_tensor_t** slice) {
  if (CurrentRuntime() == nullptr) return NoRuntimeStatus();
  if (!Valid(source) || slice == nullptr || !source->storage) return NRT_INVALID;
  if (!InRange(source, offset, size)) {
    return Invalid("nrt_tensor_allocate_slice beyond the source tensor's end");
  }
  auto* t = new nrt_tensor_t();
  t->name = name != nullptr ? name : "";
  t->placement = source->placement;
  t->vnc = source->vnc;
  t->storage = source->storage;
  t->offset = source->offset + offset;
  t->size = size;
  *slice = t;
  return NRT_SUCCESS;
}

void* nrt_tensor_get_va(const nrt_tensor_t* tensor) {
  return Valid(tensor) ? Bytes(tensor) : nullptr;
}

NRT_STATUS nrt_tensor_get_device_allocation_info(const nrt_tensor_t* tensor,
                                                 nrt_tensor_device_allocation_info_t* info) {
  Runtime* rt = CurrentRuntime();
  if (rt == nullptr) return NoRuntimeStatus();
  if (!Valid(tensor) || info == nullptr || tensor->placement != NRT_TENSOR_PLACEMENT_DEVICE) {
    return NRT_INVALID;
  }
  // The simulator has no device address space: the host address stands in for it. HBM stack:
  // NC-v2 core i uses stack i; an NC-v3 stack is shared by 2 physical cores
  // (docs/hardware.md#core-parameters).
  const int physical = rt->Loc(tensor->vnc).device_core * rt->node().lnc();
  info->physical_address = reinterpret_cast<uint64_t>(Bytes(tensor));
  info->size = tensor->size;
  info->hbm_index = rt->node().spec().chip->physical_cores > 2 ? physical / 2 : physical;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_tensor_check_output_completion(const nrt_tensor_t* tensor, int64_t timeout,
                                              uint64_t expected_completion_count) {
  if (!Valid(tensor)) return NRT_INVALID;
  const auto start = std::chrono::steady_clock::now();
  bool warned = false;
  while (tensor->completions.load(std::memory_order_acquire) < expected_completion_count) {
    const auto waited = std::chrono::steady_clock::now() - start;
    if (timeout >= 0 && waited >= std::chrono::microseconds(timeout)) return NRT_TIMEOUT;
    if (timeout < 0 && !warned && waited >= std::chrono::seconds(30)) {
      neuron::nrt::Log()->warn("nrt_tensor_check_output_completion still waiting after 30 s");
      warned = true;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return NRT_SUCCESS;
}

NRT_STATUS nrt_tensor_reset_output_completion(nrt_tensor_t* tensor) {
  if (!Valid(tensor)) return NRT_INVALID;
  tensor->completions.store(0, std::memory_order_release);
  return NRT_SUCCESS;
}

// ---- Tensor sets: plain containers, usable whatever the runtime's state ----

NRT_STATUS nrt_allocate_tensor_set(nrt_tensor_set_t** result) {
  if (result == nullptr) return NRT_INVALID;
  *result = new TensorSet();
  return NRT_SUCCESS;
}

void nrt_destroy_tensor_set(nrt_tensor_set_t** tensor_set) {
  if (tensor_set == nullptr || *tensor_set == nullptr) return;
  auto* set = static_cast<TensorSet*>(*tensor_set);
  if (set->magic != neuron::nrt::kSetMagic) return;
  set->magic = 0;
  delete set;
  *tensor_set = nullptr;
}

NRT_STATUS nrt_add_tensor_to_tensor_set(nrt_tensor_set_t* tensor_set, const char* name,
                                        nrt_tensor_t* tensor) {
  auto* set = static_cast<TensorSet*>(tensor_set);
  if (set == nullptr || set->magic != neuron::nrt::kSetMagic || name == nullptr || !Valid(tensor)) {
    return NRT_INVALID;
  }
  for (auto& [n, t] : set->items) {
    if (n == name) {
      t = tensor;
      return NRT_SUCCESS;
    }
  }
  set->items.emplace_back(name, tensor);
  return NRT_SUCCESS;
}

NRT_STATUS nrt_get_tensor_from_tensor_set(nrt_tensor_set_t* tensor_set, const char* name,
                                          nrt_tensor_t** tensor) {
  auto* set = static_cast<TensorSet*>(tensor_set);
  if (set == nullptr || set->magic != neuron::nrt::kSetMagic || name == nullptr ||
      tensor == nullptr) {
    return NRT_INVALID;
  }
  nrt_tensor_t* t = set->Find(name);
  if (t == nullptr) return NRT_FAILURE;
  *tensor = t;
  return NRT_SUCCESS;
}

}  // extern "C"
