// C API glue: life cycle, versions, instance and core counts, models
// (docs/runtime.md#public-functions, #status-codes).
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "driver-sim/runtime/log.h"
#include "driver-sim/runtime/runtime.h"
#include "nrt/nrt.h"
#include "nrt/nrt_experimental.h"

using neuron::nrt::CurrentRuntime;
using neuron::nrt::NoRuntimeStatus;
using neuron::nrt::Runtime;

namespace {

std::mutex g_init_mu;  // nrt_init and nrt_close

struct StatusName {
  NRT_STATUS status;
  const char* name;
};
constexpr StatusName kStatusNames[] = {
    {NRT_SUCCESS, "NRT_SUCCESS"},
    {NRT_FAILURE, "NRT_FAILURE"},
    {NRT_INVALID, "NRT_INVALID"},
    {NRT_INVALID_HANDLE, "NRT_INVALID_HANDLE"},
    {NRT_RESOURCE, "NRT_RESOURCE"},
    {NRT_TIMEOUT, "NRT_TIMEOUT"},
    {NRT_HW_ERROR, "NRT_HW_ERROR"},
    {NRT_QUEUE_FULL, "NRT_QUEUE_FULL"},
    {NRT_LOAD_NOT_ENOUGH_NC, "NRT_LOAD_NOT_ENOUGH_NC"},
    {NRT_UNSUPPORTED_NEFF_VERSION, "NRT_UNSUPPORTED_NEFF_VERSION"},
    {NRT_FAIL_HOST_MEM_ALLOC, "NRT_FAIL_HOST_MEM_ALLOC"},
    {NRT_UNINITIALIZED, "NRT_UNINITIALIZED"},
    {NRT_CLOSED, "NRT_CLOSED"},
    {NRT_QUEUE_EMPTY, "NRT_QUEUE_EMPTY"},
    {NRT_EXEC_UNIT_UNRECOVERABLE, "NRT_EXEC_UNIT_UNRECOVERABLE"},
    {NRT_EXEC_BAD_INPUT, "NRT_EXEC_BAD_INPUT"},
    {NRT_EXEC_COMPLETED_WITH_NUM_ERR, "NRT_EXEC_COMPLETED_WITH_NUM_ERR"},
    {NRT_EXEC_COMPLETED_WITH_ERR, "NRT_EXEC_COMPLETED_WITH_ERR"},
    {NRT_EXEC_NC_BUSY, "NRT_EXEC_NC_BUSY"},
    {NRT_EXEC_OOB, "NRT_EXEC_OOB"},
    {NRT_COLL_PENDING, "NRT_COLL_PENDING"},
    {NRT_EXEC_HW_ERR_COLLECTIVES, "NRT_EXEC_HW_ERR_COLLECTIVES"},
    {NRT_EXEC_HW_ERR_HBM_UE, "NRT_EXEC_HW_ERR_HBM_UE"},
    {NRT_EXEC_HW_ERR_NC_UE, "NRT_EXEC_HW_ERR_NC_UE"},
    {NRT_EXEC_HW_ERR_DMA_ABORT, "NRT_EXEC_HW_ERR_DMA_ABORT"},
    {NRT_EXEC_SW_NQ_OVERFLOW, "NRT_EXEC_SW_NQ_OVERFLOW"},
    {NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE, "NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE"},
    {NRT_NETWORK_PROXY_FAILURE, "NRT_NETWORK_PROXY_FAILURE"},
};

// The node without a runtime (calls allowed before nrt_init).
absl::StatusOr<neuron::nrt::NodeModel> NodeFromEnv() {
  const char* root = std::getenv("NEURON_ROOT");
  return neuron::nrt::NodeModel::Load(
      neuron::RootPaths(root == nullptr || *root == '\0' ? "/" : root));
}

void CopyString(char* dst, size_t field, const std::string& s) {
  std::memset(dst, 0, field);
  std::memcpy(dst, s.data(), std::min(s.size(), field - 1));
}

}  // namespace

extern "C" {

const char* nrt_get_status_as_str(NRT_STATUS status) {
  for (const StatusName& s : kStatusNames) {
    if (s.status == status) return s.name;
  }
  return "NRT_UNKNOWN_STATUS";
}

NRT_STATUS nrt_get_version(nrt_version_t* ver, size_t size) {
  if (ver == nullptr) return NRT_INVALID;
  nrt_version_t v{};
  v.rt_major = neuron::nrt::kRuntimeVersion.major;
  v.rt_minor = neuron::nrt::kRuntimeVersion.minor;
  v.rt_patch = neuron::nrt::kRuntimeVersion.build;
  v.rt_maintenance = 0;
  CopyString(v.rt_detail, sizeof(v.rt_detail), "libnrt-sim (neuron-node-agent simulator)");
  CopyString(v.git_hash, sizeof(v.git_hash), "0000000");
  std::memcpy(ver, &v, std::min(size, sizeof(v)));
  return NRT_SUCCESS;
}

NRT_STATUS nrt_get_instance_info(nrt_instance_info_t* info, size_t instance_info_len) {
  if (info == nullptr) return NRT_INVALID;
  std::string type;
  if (Runtime* rt = CurrentRuntime()) {
    type = std::string(rt->node().spec().name);
  } else {
    absl::StatusOr<neuron::nrt::NodeModel> node = NodeFromEnv();
    if (!node.ok()) return NRT_FAILURE;
    type = std::string(node->spec().name);
  }
  const std::string family = type.substr(0, type.find('.'));
  const std::string size = type.substr(type.find('.') + 1);
  nrt_instance_info_t out{};
  out.family = family == "trn1"    ? NRT_INSTANCE_TRN1
               : family == "trn1n" ? NRT_INSTANCE_TRN1N
               : family == "inf2"  ? NRT_INSTANCE_INF2
               : family == "trn2"  ? NRT_INSTANCE_TRN2
               : family == "trn2u" ? NRT_INSTANCE_TRN2U
                                   : NRT_INSTANCE_UNKNOWN;
  out.size = size == "xlarge"     ? NRT_INSTANCE_SIZE_1XL
             : size == "2xlarge"  ? NRT_INSTANCE_SIZE_2XL
             : size == "3xlarge"  ? NRT_INSTANCE_SIZE_3XL
             : size == "4xlarge"  ? NRT_INSTANCE_SIZE_4XL
             : size == "6xlarge"  ? NRT_INSTANCE_SIZE_6XL
             : size == "8xlarge"  ? NRT_INSTANCE_SIZE_8XL
             : size == "24xlarge" ? NRT_INSTANCE_SIZE_24XL
             : size == "32xlarge" ? NRT_INSTANCE_SIZE_32XL
             : size == "48xlarge" ? NRT_INSTANCE_SIZE_48XL
                                  : NRT_INSTANCE_SIZE_UNKNOWN;
  CopyString(out.arch_name, sizeof(out.arch_name), family);
  std::memcpy(info, &out, std::min(instance_info_len, sizeof(out)));
  return NRT_SUCCESS;
}

NRT_STATUS nrt_get_total_vnc_count(uint32_t* vnc_count) {
  if (vnc_count == nullptr) return NRT_INVALID;
  if (Runtime* rt = CurrentRuntime()) {
    *vnc_count = static_cast<uint32_t>(rt->node().total_cores());
    return NRT_SUCCESS;
  }
  absl::StatusOr<neuron::nrt::NodeModel> node = NodeFromEnv();
  if (!node.ok()) return NRT_FAILURE;
  *vnc_count = static_cast<uint32_t>(node->total_cores());
  return NRT_SUCCESS;
}
NRT_STATUS nrt_get_total_nc_count(uint32_t* vnc_count) {
  return nrt_get_total_vnc_count(vnc_count);
}

NRT_STATUS nrt_get_visible_vnc_count(uint32_t* vnc_count) {
  if (vnc_count == nullptr) return NRT_INVALID;
  if (Runtime* rt = CurrentRuntime()) {
    *vnc_count = static_cast<uint32_t>(rt->visible());
    return NRT_SUCCESS;
  }
  absl::StatusOr<neuron::nrt::NodeModel> node = NodeFromEnv();
  if (!node.ok()) return NRT_FAILURE;
  absl::StatusOr<neuron::nrt::ReservationRequest> req =
      neuron::nrt::RequestFromEnv(node->total_cores());
  if (!req.ok()) return NRT_INVALID;
  *vnc_count = static_cast<uint32_t>(req->count);
  return NRT_SUCCESS;
}
NRT_STATUS nrt_get_visible_nc_count(uint32_t* vnc_count) {
  return nrt_get_visible_vnc_count(vnc_count);
}

NRT_STATUS nrt_init(nrt_framework_type_t framework, const char* fw_version,
                    const char* fal_version) {
  (void)fal_version;
  std::lock_guard<std::mutex> lock(g_init_mu);
  if (CurrentRuntime() != nullptr) {
    neuron::nrt::Log()->error("nrt_init the runtime is already initialized in this process");
    return NRT_FAILURE;
  }
  std::unique_ptr<Runtime> rt;
  const neuron::nrt::NrtResult r = Runtime::Create(framework, fw_version, &rt);
  if (!r.ok()) return r.status;
  neuron::nrt::PublishRuntime(std::move(rt));
  return NRT_SUCCESS;
}

void nrt_close(void) {
  std::lock_guard<std::mutex> lock(g_init_mu);
  neuron::nrt::RetireRuntime();
}

NRT_STATUS nrt_load(const void* neff_bytes, size_t size, int32_t vnc, int32_t vnc_count,
                    nrt_model_t** model) {
  (void)vnc_count;
  Runtime* rt = CurrentRuntime();
  if (rt == nullptr) return NoRuntimeStatus();
  return rt->Load(neff_bytes, size, vnc, 0, 0, model).status;
}

NRT_STATUS nrt_load_collectives(const void* neff_bytes, size_t size, int32_t vnc, int32_t vnc_count,
                                uint32_t ctx_device_id, uint32_t ctx_device_count,
                                nrt_model_t** model) {
  (void)vnc_count;
  Runtime* rt = CurrentRuntime();
  if (rt == nullptr) return NoRuntimeStatus();
  if (ctx_device_count == 0) {
    neuron::nrt::Log()->error("nrt_load_collectives ctx_device_count must be at least 1");
    return NRT_INVALID;
  }
  return rt->Load(neff_bytes, size, vnc, ctx_device_id, ctx_device_count, model).status;
}

NRT_STATUS nrt_unload(nrt_model_t* model) {
  Runtime* rt = CurrentRuntime();
  if (rt == nullptr) return NoRuntimeStatus();
  if (!rt->ValidModel(model)) return NRT_INVALID_HANDLE;
  return rt->Unload(model).status;
}

NRT_STATUS nrt_get_model_vnc_count(const nrt_model_t* model, uint32_t* vnc_count) {
  Runtime* rt = CurrentRuntime();
  if (rt == nullptr) return NoRuntimeStatus();
  if (!rt->ValidModel(model)) return NRT_INVALID_HANDLE;
  if (vnc_count == nullptr) return NRT_INVALID;
  *vnc_count = static_cast<uint32_t>(model->ncores);
  return NRT_SUCCESS;
}
NRT_STATUS nrt_get_model_nc_count(const nrt_model_t* model, uint32_t* vnc_count) {
  return nrt_get_model_vnc_count(model, vnc_count);
}

NRT_STATUS nrt_get_model_info(const nrt_model_t* model, nrt_model_info_t* info, size_t info_size_in,
                              size_t* info_size_out) {
  Runtime* rt = CurrentRuntime();
  if (rt == nullptr) return NoRuntimeStatus();
  if (!rt->ValidModel(model)) return NRT_INVALID_HANDLE;
  if (info == nullptr) return NRT_INVALID;
  nrt_model_info_t out{static_cast<uint32_t>(model->vnc)};
  const size_t n = std::min(info_size_in, sizeof(out));
  std::memcpy(info, &out, n);
  if (info_size_out != nullptr) *info_size_out = n;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_get_model_instance_count(nrt_model_t* model, uint32_t* instance_count) {
  Runtime* rt = CurrentRuntime();
  if (rt == nullptr) return NoRuntimeStatus();
  if (!rt->ValidModel(model)) return NRT_INVALID_HANDLE;
  if (instance_count == nullptr) return NRT_INVALID;
  *instance_count = 1;  // one execution at a time per core
  return NRT_SUCCESS;
}

NRT_STATUS nrt_get_model_tensor_info(nrt_model_t* model, nrt_tensor_info_array_t** tensor_info) {
  Runtime* rt = CurrentRuntime();
  if (rt == nullptr) return NoRuntimeStatus();
  if (!rt->ValidModel(model)) return NRT_INVALID_HANDLE;
  if (tensor_info == nullptr) return NRT_INVALID;
  const auto& p = *model->program;
  const size_t count = p.inputs.size() + p.outputs.size();
  // One block: the array, then every shape, so the paired free is a single free().
  size_t dims = 0;
  for (const auto* list : {&p.inputs, &p.outputs}) {
    for (const auto& t : *list) dims += t.shape.size();
  }
  const size_t head = sizeof(nrt_tensor_info_array_t) + count * sizeof(nrt_tensor_info_t);
  auto* block = static_cast<uint8_t*>(std::calloc(1, head + dims * sizeof(uint32_t) + 1));
  if (block == nullptr) return NRT_RESOURCE;
  auto* arr = reinterpret_cast<nrt_tensor_info_array_t*>(block);
  auto* shapes = reinterpret_cast<uint32_t*>(block + head);
  arr->tensor_count = count;
  size_t i = 0;
  for (const auto* list : {&p.inputs, &p.outputs}) {
    for (const auto& t : *list) {
      nrt_tensor_info_t& info = arr->tensor_array[i++];
      CopyString(info.name, sizeof(info.name), t.name);
      info.usage = list == &p.inputs ? NRT_TENSOR_USAGE_INPUT : NRT_TENSOR_USAGE_OUTPUT;
      info.size = t.size;
      info.dtype = static_cast<nrt_dtype_t>(t.dtype);
      info.ndim = static_cast<uint32_t>(t.shape.size());
      info.shape = shapes;
      for (uint32_t d : t.shape) *shapes++ = d;
    }
  }
  *tensor_info = arr;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_free_model_tensor_info(nrt_tensor_info_array_t* tensor_info) {
  std::free(tensor_info);
  return NRT_SUCCESS;
}

}  // extern "C"
