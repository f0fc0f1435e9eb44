#pragma once
#if !defined(NEURON_ROOM_SAMPLE)
#error "core/sample/internal/ is private to core/sample: include its public headers instead"
#endif
// The part of libnrt's public API the agent calls, with the Neuron SDK's signatures and struct
// layouts (aws-neuron/aws-neuron-sdk src/libnrt/include/ndl/ndl.h and nrt/nds/neuron_ds.h;
// docs/driver-interface.md#process-records). Spelled here independently of libnrt-sim's copies
// (driver-sim/runtime/include), so that a mistake shared by the simulator's library and the agent
// still shows as a test failure against the SDK's layout.
//
// The library is loaded at run time (runtime_records.cc), so these are function-pointer types,
// resolved by name with dlsym.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace neuron::libnrt {

struct NdlDevice;         // ndl_device_t: only ever handled by pointer here
struct NdsInstance;       // nds_instance_t: opaque
using ObjHandle = void*;  // nds_obj_handle_t

// ndl_device_init_param_t
struct DeviceInitParam {
  bool initialize_device;
  int num_dram_regions;
  bool map_hbm;
};

// nds_version_info_t, nds_process_info_t, nds_process_info_ext_t
struct Version {
  uint8_t major;
  uint8_t minor;
  uint32_t build;
};
struct ProcessInfo {
  int8_t framework_type;
  char tag[32];
  Version framework_version;
  Version fal_version;
  Version runtime_version;
};
struct ProcessInfoExt {
  char tag[256];
};

// nds_model_node_info_t, nds_mem_usage_info_t, nds_model_node_mem_usage_info_t
inline constexpr int kMemLocations = 2;
inline constexpr int kMemSlots = 12;
struct ModelNodeInfo {
  uint32_t model_id;
  uint32_t model_node_id;
  char name[256];
  char uuid[16];
  uint8_t nc_index;
  uint8_t sg_index;
};
struct MemUsage {
  size_t total_size;
  uint32_t chunk_count;
};
struct ModelNodeMemUsage {
  MemUsage model_mem_usage[kMemLocations][kMemSlots];
};

static_assert(sizeof(Version) == 8 && sizeof(ProcessInfo) == 60 && sizeof(ProcessInfoExt) == 256);
static_assert(sizeof(ModelNodeInfo) == 284 && sizeof(ModelNodeMemUsage) == 384);

// The functions, by their libnrt names.
using NdlOpenDevice = int (*)(int device_index, DeviceInitParam* params, NdlDevice** device);
using NdlCloseDevice = int (*)(NdlDevice* device);
using NdsOpen = int (*)(NdlDevice* device, pid_t pid, NdsInstance** inst);
using NdsClose = int (*)(NdsInstance* inst);
using NdsReadProcessInfo = ObjHandle (*)(NdsInstance* inst);  // also _ext
using NdsReadAllModelNodes = int (*)(NdsInstance* inst, ObjHandle** models, size_t* count);
using NdsToProcessInfo = ProcessInfo* (*)(ObjHandle obj);
using NdsToProcessInfoExt = ProcessInfoExt* (*)(ObjHandle obj);
using NdsToModelNodeInfo = ModelNodeInfo* (*)(ObjHandle obj);
using NdsToModelNodeMemUsage = ModelNodeMemUsage* (*)(ObjHandle obj);
using NdsObjDelete = int (*)(ObjHandle obj);

}  // namespace neuron::libnrt
