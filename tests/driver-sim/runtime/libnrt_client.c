/*
 * A monitor written apart from the agent, against the Neuron SDK's datastore API only (our
 * SDK-shaped headers in driver-sim/runtime/include): it loads libnrt.so.1 at run time, opens a
 * device, lists its processes and prints each runtime's process information and model nodes.
 * libnrt_client_test runs it under `neuron-sim exec` against a running simulated workload.
 *
 * Usage: libnrt_client DEVICE [LIBRARY]. Prints, per process with a datastore:
 *   process PID framework=N tag=TAG long_tag=TAG runtime=MAJOR.MINOR.BUILD
 *   model PID ID NODE NAME nc=N device_bytes=B
 *   counter PID nc=0 infer_completed=N
 * Exit 0 when the device could be opened and listed; 1 otherwise.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ndl/ndl.h"
#include "nrt/nds/neuron_ds.h"

/* The functions, typed by the headers' own declarations. */
#define API(name) __typeof__(name)* name
static struct {
  API(ndl_open_device);
  API(ndl_close_device);
  API(ndl_get_all_apps_info);
  API(nds_open);
  API(nds_close);
  API(nds_get_nc_counter);
  API(nds_read_process_info);
  API(nds_read_process_info_ext);
  API(nds_read_all_model_nodes);
  API(nds_obj_handle_to_process_info);
  API(nds_obj_handle_to_process_info_ext);
  API(nds_obj_handle_to_model_node_info);
  API(nds_obj_handle_to_model_node_mem_usage);
  API(nds_obj_delete);
} nrt;

#define RESOLVE(lib, name)                          \
  do {                                              \
    *(void**)&nrt.name = dlsym(lib, #name);         \
    if (nrt.name == NULL) {                         \
      fprintf(stderr, "libnrt has no %s\n", #name); \
      return 0;                                     \
    }                                               \
  } while (0)

static int Load(const char* path) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    return 0;
  }
  RESOLVE(lib, ndl_open_device);
  RESOLVE(lib, ndl_close_device);
  RESOLVE(lib, ndl_get_all_apps_info);
  RESOLVE(lib, nds_open);
  RESOLVE(lib, nds_close);
  RESOLVE(lib, nds_get_nc_counter);
  RESOLVE(lib, nds_read_process_info);
  RESOLVE(lib, nds_read_process_info_ext);
  RESOLVE(lib, nds_read_all_model_nodes);
  RESOLVE(lib, nds_obj_handle_to_process_info);
  RESOLVE(lib, nds_obj_handle_to_process_info_ext);
  RESOLVE(lib, nds_obj_handle_to_model_node_info);
  RESOLVE(lib, nds_obj_handle_to_model_node_mem_usage);
  RESOLVE(lib, nds_obj_delete);
  return 1;
}

static void PrintModels(nds_instance_t* inst, int pid) {
  nds_obj_handle_t* models = NULL;
  size_t count = 0;
  if (nrt.nds_read_all_model_nodes(inst, &models, &count) != 0) {
    printf("models %d unreadable: %s\n", pid, strerror(errno));
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    const nds_model_node_info_t* m = nrt.nds_obj_handle_to_model_node_info(models[i]);
    const nds_model_node_mem_usage_info_t* u =
        nrt.nds_obj_handle_to_model_node_mem_usage(models[i]);
    size_t device_bytes = 0;
    for (int slot = 0; u != NULL && slot < NDS_DMA_MEM_USAGE_SLOT_COUNT; ++slot) {
      device_bytes += u->model_mem_usage[0][slot].total_size;
    }
    if (m != NULL) {
      printf("model %d %u %u %s nc=%u device_bytes=%zu\n", pid, m->model_id, m->model_node_id,
             m->name, m->nc_index, device_bytes);
    }
    nrt.nds_obj_delete(models[i]);
  }
  free(models);
}

static void PrintProcess(ndl_device_t* device, int pid) {
  nds_instance_t* inst = NULL;
  if (nrt.nds_open(device, pid, &inst) != 0) return; /* no datastore: not a runtime */
  nds_obj_handle_t info = nrt.nds_read_process_info(inst);
  nds_obj_handle_t ext = nrt.nds_read_process_info_ext(inst);
  if (info == NULL || ext == NULL) {
    printf("process %d unreadable: %s\n", pid, strerror(errno));
  } else {
    const nds_process_info_t* p = nrt.nds_obj_handle_to_process_info(info);
    const nds_process_info_ext_t* e = nrt.nds_obj_handle_to_process_info_ext(ext);
    printf("process %d framework=%d tag=%s long_tag=%s runtime=%u.%u.%u\n", pid, p->framework_type,
           p->tag, e->tag, p->runtime_version.major, p->runtime_version.minor,
           p->runtime_version.build);
    PrintModels(inst, pid);
  }
  if (info != NULL) nrt.nds_obj_delete(info);
  if (ext != NULL) nrt.nds_obj_delete(ext);
  uint64_t completed = 0;
  if (nrt.nds_get_nc_counter(inst, 0, NDS_NC_COUNTER_INFER_COMPLETED, &completed) == 0) {
    printf("counter %d nc=0 infer_completed=%llu\n", pid, (unsigned long long)completed);
  }
  nrt.nds_close(inst);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DEVICE [LIBRARY]\n", argv[0]);
    return 1;
  }
  if (!Load(argc > 2 ? argv[2] : "libnrt.so.1")) return 1;
  ndl_device_init_param_t params = {false, 0, false};
  ndl_device_t* device = NULL;
  if (nrt.ndl_open_device(atoi(argv[1]), &params, &device) != 0) {
    fprintf(stderr, "ndl_open_device %s: %s\n", argv[1], strerror(errno));
    return 1;
  }
  struct neuron_app_info* apps = NULL;
  size_t count = 0;
  if (nrt.ndl_get_all_apps_info(device, &apps, &count, APP_INFO_ALL) != 0) {
    fprintf(stderr, "ndl_get_all_apps_info: %s\n", strerror(errno));
    nrt.ndl_close_device(device);
    return 1;
  }
  printf("device %d type %u apps %zu\n", device->device_index, device->device_type, count);
  for (size_t i = 0; i < count; ++i) {
    if (apps[i].pid != getpid()) PrintProcess(device, apps[i].pid);
  }
  free(apps);
  nrt.ndl_close_device(device);
  return 0;
}
