// libnrt.so.1's device and datastore API (include/ndl/ndl.h, include/nrt/nds/neuron_ds.h): what a
// monitor written against the Neuron SDK's headers calls to read a runtime's datastore. It uses
// nothing but the driver's device ABI (docs/driver-interface.md#driver-abi): open of
// /dev/neuronN, GET_ALL_APPS_INFO (7), ACQUIRE_NEURON_DS (71) and a read-only mmap of the slot,
// as on hardware; under `neuron-sim exec` the simulated driver answers them.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <new>
#include <span>
#include <vector>

#include "core/driver/datastore_layout.h"
#include "core/driver/driver_abi.h"
#include "driver-sim/runtime/records.h"
#include "ndl/ndl.h"
#include "nrt/nds/neuron_ds.h"

#define NRT_EXPORT extern "C" __attribute__((visibility("default")))

static_assert(sizeof(neuron_app_info) == sizeof(neuron_abi_app_info),
              "the SDK's app info is the driver's");
static_assert(sizeof(nds_process_info_t) == 60 && sizeof(nds_process_info_ext_t) == 256);

struct nds_instance {
  ndl_device_t* device;
  pid_t pid;
  const uint8_t* base;  // the slot, mapped read-only
};

namespace {

using neuron::nrt::records::ModelNode;
using neuron::nrt::records::ReadResult;

int DeviceFd(const ndl_device_t* device) {
  ndl_device_context_t ctx;
  std::memcpy(&ctx, device->context, sizeof(ctx));
  return ctx.nd_fd;
}

// errno from a driver ioctl's return value (a positive one is a byte count not copied).
int IoctlError(int rc) { return rc > 0 ? EFAULT : errno; }

std::span<const uint8_t> Area(const nds_instance_t* inst) {
  return {inst->base + neuron::nrt::records::kAreaOffset, neuron::nrt::records::kAreaSize};
}

// Sets errno for a failed read and says whether it failed.
bool Failed(ReadResult r) {
  if (r == ReadResult::kOk) return false;
  errno = r == ReadResult::kUnknownFormat ? EPROTO : EAGAIN;
  return true;
}

// An object handle: a type tag and a copy of what was read.
struct Object {
  int type;
  union {
    nds_process_info_t process;
    nds_process_info_ext_t ext;
    ModelNode model;
  };
};

Object* NewObject(int type) {
  auto* o = static_cast<Object*>(calloc(1, sizeof(Object)));
  if (o == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  o->type = type;
  return o;
}

Object* Of(nds_obj_handle_t obj, int type) {
  auto* o = static_cast<Object*>(obj);
  return o != nullptr && o->type == type ? o : nullptr;
}

}  // namespace

NRT_EXPORT int ndl_open_device(int device_index, ndl_device_init_param_t* params,
                               ndl_device_t** device) {
  (void)params;  // nothing to initialise or map: libnrt-sim's device layer serves datastores only
  if (device == nullptr || device_index < 0 || device_index >= MAX_NEURON_DEVICE_COUNT) {
    errno = EINVAL;
    return -1;
  }
  char path[64];
  snprintf(path, sizeof(path), NEURON_DEVICE_PREFIX "%d", device_index);
  const int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return -1;
  neuron_abi_basic_info basic{};
  const int rc = ioctl(fd, NEURON_ABI_DEVICE_BASIC_INFO, &basic);
  auto* d =
      static_cast<ndl_device_t*>(calloc(1, sizeof(ndl_device_t) + sizeof(ndl_device_context_t)));
  if (d == nullptr) {
    close(fd);
    errno = ENOMEM;
    return -1;
  }
  d->device_index = static_cast<uint8_t>(device_index);
  if (rc == 0) {
    d->device_type = static_cast<uint8_t>(basic.architecture);
    d->device_revision = static_cast<uint16_t>(basic.revision);
  }
  const ndl_device_context_t ctx{fd};
  std::memcpy(d->context, &ctx, sizeof(ctx));
  *device = d;
  return 0;
}

NRT_EXPORT int ndl_close_device(ndl_device_t* device) {
  if (device == nullptr) {
    errno = EINVAL;
    return -1;
  }
  const int rc = close(DeviceFd(device));
  free(device);
  return rc == 0 ? 0 : -1;
}

NRT_EXPORT int ndl_get_all_apps_info(ndl_device_t* device, struct neuron_app_info** info,
                                     size_t* count, uint16_t apps_info_flags) {
  if (device == nullptr || info == nullptr || count == nullptr) {
    errno = EINVAL;
    return -1;
  }
  std::vector<uint8_t> buf(sizeof(neuron_abi_apps_header) +
                           NEURON_ABI_MAX_PROCESSES * sizeof(neuron_abi_app_info));
  neuron_abi_apps_header header{};
  header.flags = apps_info_flags;
  header.capacity = NEURON_ABI_MAX_PROCESSES;
  std::memcpy(buf.data(), &header, sizeof(header));
  if (const int rc = ioctl(DeviceFd(device), NEURON_ABI_GET_ALL_APPS_INFO, buf.data()); rc != 0) {
    errno = IoctlError(rc);
    return -1;
  }
  std::memcpy(&header, buf.data(), sizeof(header));
  const size_t n = header.size < NEURON_ABI_MAX_PROCESSES ? header.size : NEURON_ABI_MAX_PROCESSES;
  auto* out = static_cast<neuron_app_info*>(calloc(n > 0 ? n : 1, sizeof(neuron_app_info)));
  if (out == nullptr) {
    errno = ENOMEM;
    return -1;
  }
  std::memcpy(out, buf.data() + sizeof(header), n * sizeof(neuron_app_info));
  *info = out;
  *count = n;
  return 0;
}

NRT_EXPORT int nds_open(ndl_device_t* device, pid_t pid, nds_instance_t** inst) {
  if (device == nullptr || inst == nullptr || pid <= 0) {
    errno = EINVAL;  // pid 0 (a writer) is libnrt-sim's runtime's own business
    return -1;
  }
  const int fd = DeviceFd(device);
  neuron_abi_ds_info ds{};
  ds.pid = pid;
  if (const int rc = ioctl(fd, NEURON_ABI_ACQUIRE_DS, &ds); rc != 0) {
    errno = IoctlError(rc);
    return -1;
  }
  if (ds.size != NEURON_ABI_DS_SIZE) {
    errno = EPROTO;
    return -1;
  }
  void* map = mmap(nullptr, ds.size, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(ds.mmap_offset));
  if (map == MAP_FAILED) return -1;
  auto* i = new (std::nothrow) nds_instance{device, pid, static_cast<const uint8_t*>(map)};
  if (i == nullptr) {
    munmap(map, ds.size);
    errno = ENOMEM;
    return -1;
  }
  *inst = i;
  return 0;
}

NRT_EXPORT int nds_close(nds_instance_t* inst) {
  if (inst == nullptr) return 0;
  munmap(const_cast<uint8_t*>(inst->base), NEURON_ABI_DS_SIZE);
  delete inst;
  return 0;
}

NRT_EXPORT int nds_get_nc_counter(nds_instance_t* inst, int pnc_index, uint32_t counter_index,
                                  uint64_t* value) {
  const std::optional<size_t> at =
      neuron::nds::CoreCounterOffset(pnc_index, static_cast<int>(counter_index));
  if (inst == nullptr || value == nullptr || !at) {
    errno = EINVAL;
    return -1;
  }
  *value = __atomic_load_n(reinterpret_cast<const uint64_t*>(inst->base + *at), __ATOMIC_RELAXED);
  return 0;
}

NRT_EXPORT int nds_get_nd_counter(nds_instance_t* inst, uint32_t counter_index, uint64_t* value) {
  if (inst == nullptr || value == nullptr || counter_index >= NDS_ND_COUNTER_COUNT) {
    errno = EINVAL;
    return -1;
  }
  const size_t at = neuron::nds::DeviceCounterOffset(static_cast<int>(counter_index));
  *value = __atomic_load_n(reinterpret_cast<const uint64_t*>(inst->base + at), __ATOMIC_RELAXED);
  return 0;
}

namespace {

Object* ReadProcess(nds_instance_t* inst, int type) {
  if (inst == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  nds_process_info_t info;
  nds_process_info_ext_t ext;
  if (Failed(neuron::nrt::records::ReadProcessInfo(Area(inst), &info, &ext))) return nullptr;
  Object* o = NewObject(type);
  if (o == nullptr) return nullptr;
  if (type == OBJECT_TYPE_PROCESS_INFO) o->process = info;
  if (type == OBJECT_TYPE_PROCESS_INFO_EXT) o->ext = ext;
  return o;
}

}  // namespace

NRT_EXPORT nds_obj_handle_t nds_read_process_info(nds_instance_t* inst) {
  return ReadProcess(inst, OBJECT_TYPE_PROCESS_INFO);
}

NRT_EXPORT nds_obj_handle_t nds_read_process_info_ext(nds_instance_t* inst) {
  return ReadProcess(inst, OBJECT_TYPE_PROCESS_INFO_EXT);
}

NRT_EXPORT int nds_read_all_model_nodes(nds_instance_t* inst, nds_obj_handle_t** models,
                                        size_t* count) {
  if (inst == nullptr || models == nullptr || count == nullptr) {
    errno = EINVAL;
    return -1;
  }
  std::vector<ModelNode> nodes;
  if (Failed(neuron::nrt::records::ReadModels(Area(inst), &nodes))) return -1;
  auto* handles =
      static_cast<nds_obj_handle_t*>(calloc(nodes.empty() ? 1 : nodes.size(), sizeof(void*)));
  if (handles == nullptr) {
    errno = ENOMEM;
    return -1;
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    Object* o = NewObject(OBJECT_TYPE_MODEL_NODE_INFO);
    if (o == nullptr) {
      for (size_t j = 0; j < i; ++j) free(handles[j]);
      free(handles);
      return -1;
    }
    o->model = nodes[i];
    handles[i] = o;
  }
  *models = handles;
  *count = nodes.size();
  return 0;
}

NRT_EXPORT nds_process_info_t* nds_obj_handle_to_process_info(nds_obj_handle_t obj) {
  Object* o = Of(obj, OBJECT_TYPE_PROCESS_INFO);
  return o != nullptr ? &o->process : nullptr;
}

NRT_EXPORT nds_process_info_ext_t* nds_obj_handle_to_process_info_ext(nds_obj_handle_t obj) {
  Object* o = Of(obj, OBJECT_TYPE_PROCESS_INFO_EXT);
  return o != nullptr ? &o->ext : nullptr;
}

NRT_EXPORT nds_model_node_info_t* nds_obj_handle_to_model_node_info(nds_obj_handle_t obj) {
  Object* o = Of(obj, OBJECT_TYPE_MODEL_NODE_INFO);
  return o != nullptr ? &o->model.info : nullptr;
}

NRT_EXPORT nds_model_node_mem_usage_info_t* nds_obj_handle_to_model_node_mem_usage(
    nds_obj_handle_t obj) {
  Object* o = Of(obj, OBJECT_TYPE_MODEL_NODE_INFO);
  return o != nullptr ? &o->model.memory : nullptr;
}

NRT_EXPORT int nds_obj_delete(nds_obj_handle_t obj) {
  free(obj);
  return 0;
}
