#include "core/sample/libnrt_exec.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "core/base/file_io.h"
#include "core/sample/internal/dl_symbols.h"

namespace neuron {
namespace {

// The runtime's C API (the Neuron SDK's nrt/nrt.h) as far as one execution needs it. Handles are
// opaque pointers; enums are passed as int, as the C ABI passes them.
using NrtInit = int (*)(int framework, const char* fw_version, const char* fal_version);
using NrtClose = void (*)();
using NrtLoad = int (*)(const void* neff, size_t size, int32_t vnc, int32_t vnc_count,
                        void** model);
using NrtLoadCollectives = int (*)(const void* neff, size_t size, int32_t vnc, int32_t vnc_count,
                                   uint32_t rank, uint32_t world, void** model);
using NrtAllocateTensorSet = int (*)(void** set);
using NrtAddTensorToSet = int (*)(void* set, const char* name, void* tensor);
using NrtTensorAllocate = int (*)(int placement, int vnc, size_t size, const char* name,
                                  void** tensor);
using NrtTensorWrite = int (*)(void* tensor, const void* buf, size_t offset, size_t size);
using NrtTensorRead = int (*)(const void* tensor, void* buf, size_t offset, size_t size);
using NrtExecute = int (*)(void* model, const void* inputs, void* outputs);
using NrtStatusText = const char* (*)(int status);

constexpr int kFrameworkNoFw = 1;    // NRT_FRAMEWORK_TYPE_NO_FW
constexpr int kPlacementDevice = 0;  // NRT_TENSOR_PLACEMENT_DEVICE

struct ExecApi {
  NrtInit init = nullptr;
  NrtClose close = nullptr;
  NrtLoad load = nullptr;
  NrtLoadCollectives load_collectives = nullptr;
  NrtAllocateTensorSet allocate_set = nullptr;
  NrtAddTensorToSet add_to_set = nullptr;
  NrtTensorAllocate tensor_allocate = nullptr;
  NrtTensorWrite tensor_write = nullptr;
  NrtTensorRead tensor_read = nullptr;
  NrtExecute execute = nullptr;
  NrtStatusText status_text = nullptr;  // optional
};

using dl_symbols::Resolve;

// The library stays loaded: the process exits after its one execution.
absl::StatusOr<ExecApi> LoadExecApi(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = dlerror();
    return absl::FailedPreconditionError(fmt::format("cannot load libnrt ({})", e ? e : path));
  }
  ExecApi a;
  std::string missing;
  Resolve(h, "nrt_init", &a.init, &missing);
  Resolve(h, "nrt_close", &a.close, &missing);
  Resolve(h, "nrt_load", &a.load, &missing);
  Resolve(h, "nrt_load_collectives", &a.load_collectives, &missing);
  Resolve(h, "nrt_allocate_tensor_set", &a.allocate_set, &missing);
  Resolve(h, "nrt_add_tensor_to_tensor_set", &a.add_to_set, &missing);
  Resolve(h, "nrt_tensor_allocate", &a.tensor_allocate, &missing);
  Resolve(h, "nrt_tensor_write", &a.tensor_write, &missing);
  Resolve(h, "nrt_tensor_read", &a.tensor_read, &missing);
  Resolve(h, "nrt_execute", &a.execute, &missing);
  if (!missing.empty()) {
    return absl::FailedPreconditionError(fmt::format(
        "{} has no {}: not a libnrt that executes programs (the Neuron runtime's libnrt.so.1)",
        path, missing));
  }
  std::string optional;
  Resolve(h, "nrt_get_status_as_str", &a.status_text, &optional);
  return a;
}

absl::Status CallFailed(const ExecApi& api, const char* call, int status) {
  const char* text = api.status_text != nullptr ? api.status_text(status) : nullptr;
  return absl::InternalError(
      fmt::format("{} failed: {} ({})", call, text ? text : "NRT_STATUS", status));
}

// A tensor set of device tensors on core 0 of this process, named as the program names them;
// `bytes` written into each when given.
absl::StatusOr<void*> MakeSet(const ExecApi& api,
                              const std::vector<std::pair<std::string, size_t>>& specs,
                              const std::vector<std::pair<std::string, std::string>>* bytes,
                              std::vector<void*>* tensors) {
  void* set = nullptr;
  if (int s = api.allocate_set(&set); s != 0) return CallFailed(api, "nrt_allocate_tensor_set", s);
  for (size_t i = 0; i < specs.size(); ++i) {
    void* t = nullptr;
    const auto& [name, size] = specs[i];
    if (int s = api.tensor_allocate(kPlacementDevice, 0, size, name.c_str(), &t); s != 0) {
      return CallFailed(api, "nrt_tensor_allocate", s);
    }
    if (bytes != nullptr) {
      const std::string& b = (*bytes)[i].second;
      if (int s = api.tensor_write(t, b.data(), 0, b.size()); s != 0) {
        return CallFailed(api, "nrt_tensor_write", s);
      }
    }
    if (int s = api.add_to_set(set, name.c_str(), t); s != 0) {
      return CallFailed(api, "nrt_add_tensor_to_tensor_set", s);
    }
    tensors->push_back(t);
  }
  return set;
}

using Outputs = std::vector<std::pair<std::string, std::string>>;

absl::StatusOr<Outputs> ReadOutputs(const ExecApi& api,
                                    const std::vector<std::pair<std::string, size_t>>& specs,
                                    const std::vector<void*>& tensors) {
  Outputs out;
  for (size_t i = 0; i < specs.size(); ++i) {
    std::string bytes(specs[i].second, '\0');
    if (int s = api.tensor_read(tensors[i], bytes.data(), 0, bytes.size()); s != 0) {
      return CallFailed(api, "nrt_tensor_read", s);
    }
    out.emplace_back(specs[i].first, std::move(bytes));
  }
  return out;
}
}  // namespace

absl::Status ProbeLibnrt(const std::string& libnrt) {
  void* h = dlopen(libnrt.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = dlerror();
    return absl::FailedPreconditionError(fmt::format("cannot load libnrt ({})", e ? e : libnrt));
  }
  const bool executes = dlsym(h, "nrt_execute") != nullptr && dlsym(h, "nrt_init") != nullptr;
  dlclose(h);
  if (!executes) {
    return absl::FailedPreconditionError(
        fmt::format("{} has no nrt_init/nrt_execute: not a libnrt that executes programs", libnrt));
  }
  return absl::OkStatus();
}

absl::StatusOr<NeffResult> RunNeffOnce(const NeffRun& run) {
  absl::StatusOr<std::string> neff = ReadWholeFile(run.neff);
  if (!neff.ok()) return neff.status();
  absl::StatusOr<ExecApi> api = LoadExecApi(run.libnrt);
  if (!api.ok()) return api.status();
  if (int s = api->init(kFrameworkNoFw, "", ""); s != 0) return CallFailed(*api, "nrt_init", s);
  void* model = nullptr;
  const int loaded = run.world > 1 ? api->load_collectives(neff->data(), neff->size(), 0, 1,
                                                           run.rank, run.world, &model)
                                   : api->load(neff->data(), neff->size(), 0, 1, &model);
  if (loaded != 0) {
    return CallFailed(*api, run.world > 1 ? "nrt_load_collectives" : "nrt_load", loaded);
  }
  std::vector<std::pair<std::string, size_t>> in_specs;
  for (const auto& [name, b] : run.inputs) in_specs.emplace_back(name, b.size());
  std::vector<void*> in_tensors;
  std::vector<void*> out_tensors;
  absl::StatusOr<void*> in = MakeSet(*api, in_specs, &run.inputs, &in_tensors);
  if (!in.ok()) return in.status();
  absl::StatusOr<void*> out = MakeSet(*api, run.outputs, nullptr, &out_tensors);
  if (!out.ok()) return out.status();
  NeffResult result;
  for (int e = 0; e < std::max(1, run.executions); ++e) {
    const auto start = std::chrono::steady_clock::now();
    result.status = api->execute(model, *in, *out);
    result.execute_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now() - start)
                            .count();
    if (result.status != 0) {
      const char* text = api->status_text != nullptr ? api->status_text(result.status) : nullptr;
      result.status_text = text != nullptr ? text : "";
      api->close();
      return result;
    }
    absl::StatusOr<Outputs> got = ReadOutputs(*api, run.outputs, out_tensors);
    if (!got.ok()) return got.status();
    result.executions.push_back(*std::move(got));
  }
  // Release the cores before the caller reports: the process exits right after.
  api->close();
  return result;
}

}  // namespace neuron
