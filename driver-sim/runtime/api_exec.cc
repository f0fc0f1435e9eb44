// C API glue: executions, async mode, host-driven collectives, memory stats, profiling and the
// plumbing the simulator does not model (docs/runtime.md#public-functions).
#include <fmt/format.h>

#include <cstring>
#include <string>

#include "driver-sim/runtime/log.h"
#include "driver-sim/runtime/runtime.h"
#include "nrt/nrt.h"
#include "nrt/nrt_experimental.h"

using neuron::nrt::CurrentRuntime;
using neuron::nrt::NoRuntimeStatus;
using neuron::nrt::Runtime;
using neuron::nrt::TensorSet;

namespace {

const TensorSet* AsSet(const nrt_tensor_set_t* s) { return static_cast<const TensorSet*>(s); }

bool ValidSet(const nrt_tensor_set_t* s) {
  return s == nullptr || AsSet(s)->magic == neuron::nrt::kSetMagic;
}

std::string g_profile_path;  // nrt_profile_start's file, for a stop without one
std::mutex g_profile_mu;

NRT_STATUS NotModelled(const char* fn) {
  neuron::nrt::Log()->warn("{} is not modelled by libnrt-sim", fn);
  return NRT_INVALID;
}

}  // namespace

extern "C" {

NRT_STATUS nrt_execute(nrt_model_t* model, const nrt_tensor_set_t* input_set,
                       nrt_tensor_set_t* output_set) {
  Runtime* rt = CurrentRuntime();
  if (rt == nullptr) [[unlikely]] {
    return NoRuntimeStatus();
  }
  if (!rt->ValidModel(model)) [[unlikely]] {
    return NRT_INVALID_HANDLE;
  }
  if (!ValidSet(input_set) || !ValidSet(output_set)) [[unlikely]] {
    return NRT_INVALID;
  }
  return rt->Execute(model, AsSet(input_set), static_cast<TensorSet*>(output_set), 1);
}

NRT_STATUS nrt_execute_repeat(nrt_model_t* model, const nrt_tensor_set_t* input_set,
                              nrt_tensor_set_t* output_set, int repeat_count) {
  Runtime* rt = CurrentRuntime();
  if (rt == nullptr) return NoRuntimeStatus();
  if (!rt->ValidModel(model)) return NRT_INVALID_HANDLE;
  if (!ValidSet(input_set) || !ValidSet(output_set) || repeat_count < 1) return NRT_INVALID;
  return rt->Execute(model, AsSet(input_set), static_cast<TensorSet*>(output_set), repeat_count);
}

NRT_STATUS nrt_register_async_exec_callback(NRT_ASYNC_EXEC_STATUS_CALLBACK callback, void* params) {
  neuron::nrt::SetAsyncCallback(callback, params);
  return NRT_SUCCESS;
}

NRT_STATUS nrt_async_drain_queued_execs(int32_t vnc) {
  Runtime* rt = CurrentRuntime();
  if (rt == nullptr) return NoRuntimeStatus();
  if (vnc < 0 || vnc >= rt->visible()) return NRT_INVALID;
  rt->core(vnc).Drain();
  return NRT_SUCCESS;
}

NRT_STATUS nrt_barrier(int32_t vnc, uint32_t g_device_id, uint32_t g_device_count) {
  Runtime* rt = CurrentRuntime();
  if (rt == nullptr) return NoRuntimeStatus();
  return rt->HostCollective(vnc, g_device_id, g_device_count, 0, nullptr, nullptr);
}

NRT_STATUS nrt_all_gather(int32_t vnc, uint32_t g_device_id, uint32_t g_device_count,
                          uint32_t rank_input_size, void* input, void* output) {
  Runtime* rt = CurrentRuntime();
  if (rt == nullptr) return NoRuntimeStatus();
  if (output == nullptr) return NRT_INVALID;
  return rt->HostCollective(vnc, g_device_id, g_device_count, rank_input_size, input, output);
}

// The global communicator needs no set-up in the simulator beyond the checks: a world's
// connections are made on first use (driver-sim/README.md#collective-world).
NRT_STATUS nrt_build_global_comm(int32_t vnc, uint32_t g_device_id, uint32_t g_device_count) {
  Runtime* rt = CurrentRuntime();
  if (rt == nullptr) return NoRuntimeStatus();
  if (vnc < 0 || vnc >= rt->visible() || g_device_count == 0 || g_device_id >= g_device_count ||
      std::getenv("NEURON_RT_ROOT_COMM_ID") == nullptr) {
    return NRT_INVALID;
  }
  return NRT_SUCCESS;
}

NRT_STATUS nrt_cc_global_comm_init(uint32_t vnc, uint32_t g_device_id, uint32_t g_device_count) {
  return nrt_build_global_comm(static_cast<int32_t>(vnc), g_device_id, g_device_count);
}

NRT_STATUS nrt_get_vnc_memory_stats(uint32_t vnc, nrt_vnc_memory_stats_t* stats,
                                    size_t stats_size_in, size_t* stats_size_out) {
  Runtime* rt = CurrentRuntime();
  if (rt == nullptr) return NoRuntimeStatus();
  if (stats == nullptr || vnc >= static_cast<uint32_t>(rt->visible())) return NRT_INVALID;
  nrt_vnc_memory_stats_t out{rt->ledger()->DeviceUsed(static_cast<int>(vnc)),
                             rt->ledger()->core_limit()};
  const size_t n = std::min(stats_size_in, sizeof(out));
  std::memcpy(stats, &out, n);
  if (stats_size_out != nullptr) *stats_size_out = n;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_profile_start(nrt_model_t* model, const char* filename) {
  Runtime* rt = CurrentRuntime();
  if (rt == nullptr) return NoRuntimeStatus();
  if (!rt->ValidModel(model)) return NRT_INVALID_HANDLE;
  {
    std::lock_guard<std::mutex> lock(g_profile_mu);
    g_profile_path = filename != nullptr ? filename : "";
  }
  rt->profiler().Start(model->id);
  return NRT_SUCCESS;
}

NRT_STATUS nrt_profile_stop(const char* filename) {
  Runtime* rt = CurrentRuntime();
  if (rt == nullptr) return NoRuntimeStatus();
  std::string path = filename != nullptr ? filename : "";
  if (path.empty()) {
    std::lock_guard<std::mutex> lock(g_profile_mu);
    path = g_profile_path;
  }
  if (path.empty()) return NRT_INVALID;
  const absl::Status s = rt->profiler().Stop(path);
  if (!s.ok()) {
    neuron::nrt::Log()->error("nrt_profile_stop {}", std::string{s.message()});
    return NRT_INVALID;
  }
  return NRT_SUCCESS;
}

NRT_STATUS nrt_trace_start(bool trace_mem) {
  (void)trace_mem;
  Runtime* rt = CurrentRuntime();
  if (rt == nullptr) return NoRuntimeStatus();
  rt->profiler().Start(0);
  return NRT_SUCCESS;
}

NRT_STATUS nrt_trace_stop(const char* filename) {
  if (filename == nullptr) return NRT_INVALID;
  return nrt_profile_stop(filename);
}

NRT_STATUS nrt_get_dmabuf_fd(uint64_t, uint64_t, int*) { return NotModelled("nrt_get_dmabuf_fd"); }
NRT_STATUS nrt_host_device_id_get(int, uint32_t*) { return NotModelled("nrt_host_device_id_get"); }
NRT_STATUS nrt_host_device_id_rid_map_get(uint32_t*, uint32_t*) {
  return NotModelled("nrt_host_device_id_rid_map_get");
}
NRT_STATUS nrt_get_hbm_mmap_va(int, int, void**, size_t*) {
  return NotModelled("nrt_get_hbm_mmap_va");
}
NRT_STATUS nrt_get_attached_efa_bdf(const void*, char*, size_t*) {
  return NotModelled("nrt_get_attached_efa_bdf");
}
NRT_STATUS nrt_memcpy_to_device(void*, const void*, size_t) {
  return NotModelled("nrt_memcpy_to_device");
}

}  // extern "C"
