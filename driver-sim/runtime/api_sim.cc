// C API glue: libnrt-sim's own calls (include/nrt/nrtsim.h).
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "driver-sim/runtime/log.h"
#include "driver-sim/runtime/program.h"
#include "driver-sim/runtime/runtime.h"
#include "driver-sim/runtime/timing.h"
#include "nrt/nrtsim.h"

using neuron::nrt::CurrentRuntime;
using neuron::nrt::NoRuntimeStatus;
using neuron::nrt::Runtime;

extern "C" {

NRT_STATUS nrtsim_build_neff(const char* op_list_json, const nrtsim_neff_options_t* options,
                             void** neff, size_t* size) {
  if (op_list_json == nullptr || neff == nullptr || size == nullptr) {
    neuron::nrt::SetLastError("nrtsim_build_neff: NULL argument");
    return NRT_INVALID;
  }
  const std::string_view payload(op_list_json);
  absl::StatusOr<neuron::nrt::Program> program = neuron::nrt::ParseOpList(payload);
  if (!program.ok()) {
    neuron::nrt::SetLastError(std::string{program.status().message()});
    return NRT_INVALID;
  }
  const nrtsim_neff_options_t opts = options != nullptr ? *options : nrtsim_neff_options_t{};
  neuron::nrt::NeffHeader h;
  h.data_size = payload.size();
  h.neff_version_major = opts.neff_version_major != 0 ? opts.neff_version_major : 2;
  h.neff_version_minor = opts.neff_version_minor;
  h.num_tpb = opts.num_tpb != 0 ? opts.num_tpb : 1;
  h.requested_tpb_count = h.num_tpb;
  h.lnc_size = opts.lnc_size;
  h.name = opts.name != nullptr ? opts.name : "nrtsim";
  if (h.name.size() > 255) h.name.resize(255);
  h.hash = neuron::nrt::PayloadHash(payload);
  if (opts.uuid != nullptr) {
    std::memcpy(h.uuid.data(), opts.uuid, h.uuid.size());
  } else {
    const auto name_hash = neuron::nrt::PayloadHash(h.name);
    for (size_t i = 0; i < h.uuid.size(); ++i) h.uuid[i] = h.hash[i] ^ name_hash[(i + 3) % 8];
  }
  const auto header = neuron::nrt::EncodeNeffHeader(h);
  auto* out = static_cast<uint8_t*>(std::malloc(header.size() + payload.size()));
  if (out == nullptr) return NRT_RESOURCE;
  std::memcpy(out, header.data(), header.size());
  std::memcpy(out + header.size(), payload.data(), payload.size());
  *neff = out;
  *size = header.size() + payload.size();
  neuron::nrt::SetLastError("");
  return NRT_SUCCESS;
}

void nrtsim_free_neff(void* neff) { std::free(neff); }

const char* nrtsim_last_error(void) { return neuron::nrt::LastError().c_str(); }

NRT_STATUS nrtsim_get_core_info(uint32_t vnc, nrtsim_core_info_t* info) {
  Runtime* rt = CurrentRuntime();
  if (rt == nullptr) return NoRuntimeStatus();
  if (info == nullptr || vnc >= static_cast<uint32_t>(rt->visible())) return NRT_INVALID;
  const neuron::nrt::CoreLocation loc = rt->Loc(static_cast<int>(vnc));
  info->global_core = static_cast<uint32_t>(loc.global);
  info->device = static_cast<uint32_t>(loc.device);
  info->device_core = static_cast<uint32_t>(loc.device_core);
  info->lnc = static_cast<uint32_t>(rt->node().lnc());
  return NRT_SUCCESS;
}

NRT_STATUS nrtsim_get_model_estimate(const nrt_model_t* model, nrtsim_model_estimate_t* est) {
  Runtime* rt = CurrentRuntime();
  if (rt == nullptr) return NoRuntimeStatus();
  if (!rt->ValidModel(model)) return NRT_INVALID_HANDLE;
  if (est == nullptr) return NRT_INVALID;
  const neuron::nrt::CollectivePath path = neuron::nrt::PathFor(rt->node());
  uint64_t coll = 0;
  for (const neuron::nrt::LoadedOp& op : model->ops) {
    if (op.op->engine != neuron::nrt::Engine::kCollectives) continue;
    if (op.ring_known) {
      coll += static_cast<uint64_t>(op.ring_ns);
      continue;
    }
    const uint64_t local = op.members.size();
    coll +=
        static_cast<uint64_t>(neuron::nrt::CostCollective(op.op->coll, op.op->bytes, local,
                                                          neuron::nrt::NodesOf(*op.op, local), path)
                                  .ns);
  }
  est->compute_ns = static_cast<uint64_t>(model->compute_ns);
  est->collective_ns = coll;
  est->duration_ns = est->compute_ns + coll;
  est->flops = model->flops;
  est->mac_count = model->macs;
  return NRT_SUCCESS;
}

NRT_STATUS nrtsim_get_core_stats(uint32_t vnc, nrtsim_core_stats_t* stats) {
  Runtime* rt = CurrentRuntime();
  if (rt == nullptr) return NoRuntimeStatus();
  if (stats == nullptr || vnc >= static_cast<uint32_t>(rt->visible())) return NRT_INVALID;
  const neuron::nrt::CoreStatsSnapshot s = rt->accounting().Stats(static_cast<int>(vnc));
  stats->executions = s.executions;
  stats->busy_ns = s.busy_ns;
  stats->collective_ns = s.cc_ns;
  stats->last_exec_ns = s.last_exec_ns;
  return NRT_SUCCESS;
}

}  // extern "C"
