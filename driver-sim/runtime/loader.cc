// nrt_load, nrt_load_collectives and nrt_unload (docs/runtime.md#public-functions, #neff-header,
// #load).
#include <fmt/format.h>

#include <algorithm>

#include "driver-sim/runtime/log.h"
#include "driver-sim/runtime/runtime.h"
#include "driver-sim/runtime/timing.h"

namespace neuron::nrt {
namespace {

NrtResult Fail(NRT_STATUS status, std::string message) {
  Log()->error("nrt_load {}", message);
  SetLastError(message);
  return {status, std::move(message)};
}

// The replica group `rank` belongs to in collective `op`: every rank of the world when the op
// names no groups. An error message when the groups leave `rank` out or name ranks beyond it.
absl::StatusOr<std::vector<uint32_t>> CollectiveMembers(const Op& op, uint32_t rank,
                                                        uint32_t world) {
  std::vector<uint32_t> members;
  if (op.groups.empty()) {
    for (uint32_t r = 0; r < world; ++r) members.push_back(r);
    return members;
  }
  for (const auto& g : op.groups) {
    if (std::find(g.begin(), g.end(), rank) != g.end()) members = g;
  }
  if (members.empty()) {
    return absl::InvalidArgumentError(fmt::format(
        "rank {} is in none of the replica groups of collective \"{}\"", rank, op.name));
  }
  for (uint32_t r : members) {
    if (r >= world) {
      return absl::InvalidArgumentError(
          fmt::format("collective \"{}\" names rank {} of a world of {}", op.name, r, world));
    }
  }
  return members;
}

}  // namespace

NrtResult Runtime::Load(const void* bytes, size_t size, int32_t vnc, uint32_t rank, uint32_t world,
                        nrt_model_t** out) {
  if (bytes == nullptr || out == nullptr) return Fail(NRT_INVALID, "NULL NEFF or model pointer");
  const std::string_view neff(static_cast<const char*>(bytes), size);
  absl::StatusOr<NeffHeader> header = DecodeNeffHeader(neff);
  if (!header.ok()) return Fail(NRT_INVALID, std::string{header.status().message()});
  const int ncores = std::max<int>(1, static_cast<int>(header->num_tpb));
  if (NrtResult r = CheckNeffHeader(*header, vnc, ncores); !r.ok()) return r;
  absl::StatusOr<Program> parsed = ParseOpList(neff.substr(kNeffHeaderSize));
  if (!parsed.ok()) return Fail(NRT_INVALID, std::string{parsed.status().message()});
  auto program = std::make_shared<const Program>(std::move(*parsed));
  if (NrtResult r = CheckCollectiveContext(*program, rank, world); !r.ok()) return r;
  if (vnc < 0) vnc = PickCore(ncores);
  if (vnc < 0 || vnc + ncores > range_.count) {
    return Fail(NRT_INVALID, fmt::format("NeuronCore {} (+{}) is outside the {} visible cores", vnc,
                                         ncores - 1, range_.count));
  }

  auto model = std::make_unique<nrt_model_t>();
  model->runtime = this;
  model->vnc = vnc;
  model->ncores = ncores;
  model->name = header->name;
  model->uuid = header->uuid;
  model->program = program;
  model->rank = rank;
  if (NrtResult r = LoadOps(*model, world); !r.ok()) return r;
  if (world > 0) {
    absl::StatusOr<std::shared_ptr<CommWorld>> w =
        GetCommWorld(comm_id_, world, node_.info().instance_id);
    absl::Status joined = w.ok() ? (*w)->Join(rank, Loc(vnc).device) : w.status();
    if (!joined.ok()) return Fail(NRT_INVALID, std::string{joined.message()});
    model->world = *w;
  }
  model->charged[static_cast<int>(MemCategory::kCode)] = size + program->memory.code;
  model->charged[static_cast<int>(MemCategory::kConstants)] = program->memory.constants;
  model->charged[static_cast<int>(MemCategory::kScratchpad)] = program->memory.scratchpad;
  model->charged[static_cast<int>(MemCategory::kMisc)] = program->memory.misc;
  std::lock_guard<std::mutex> lock(models_mu_);
  if (NrtResult r = ChargeModel(*model); !r.ok()) return r;
  RegisterModel(*model, size);
  *out = model.get();
  models_.insert(model.release());
  return {};
}

NrtResult Runtime::CheckNeffHeader(const NeffHeader& header, int32_t vnc, int ncores) {
  if (header.neff_version_major < kNeffMinMajor || header.neff_version_major > kNeffMaxMajor) {
    if (vnc >= 0 && vnc < range_.count) accounting_->CountStatus(vnc, NRT_UNSUPPORTED_NEFF_VERSION);
    return Fail(
        NRT_UNSUPPORTED_NEFF_VERSION,
        fmt::format("NEFF version mismatch supported: {}.0-{}.x received: {}.{}", kNeffMinMajor,
                    kNeffMaxMajor, header.neff_version_major, header.neff_version_minor));
  }
  if (ncores > range_.count) {
    return Fail(NRT_LOAD_NOT_ENOUGH_NC,
                fmt::format("NEFF \"{}\" needs {} NeuronCores; {} are visible", header.name, ncores,
                            range_.count));
  }
  if (header.lnc_size != 0 && static_cast<int>(header.lnc_size) != node_.lnc()) {
    return Fail(NRT_INVALID,
                fmt::format("NEFF \"{}\" was compiled for logical NeuronCore size {} but the "
                            "node runs NEURON_LOGICAL_NC_CONFIG={}",
                            header.name, header.lnc_size, node_.lnc()));
  }
  return {};
}

NrtResult Runtime::CheckCollectiveContext(const Program& program, uint32_t rank,
                                          uint32_t world) const {
  if (program.has_collectives && world == 0) {
    return Fail(NRT_INVALID, "the NEFF has collectives: load it with nrt_load_collectives");
  }
  if (world == 0) return {};
  if (comm_id_.empty()) {
    return Fail(NRT_INVALID, "NEURON_RT_ROOT_COMM_ID must be set for NEFFs with collectives");
  }
  if (rank >= world) {
    return Fail(NRT_INVALID, fmt::format("ctx_device_id {} is outside the {} devices of the "
                                         "collective context",
                                         rank, world));
  }
  return {};
}

namespace {

// An all-gather with tensors fills its output with every member's input, in group order.
absl::Status CheckGatherOutput(const Program& p, const Op& op, size_t members) {
  if (op.coll != CollKind::kAllGather || op.input.empty()) return absl::OkStatus();
  uint64_t in = 0;
  uint64_t out = 0;
  for (const TensorSpec& t : p.inputs) in = t.name == op.input ? t.size : in;
  for (const TensorSpec& t : p.outputs) out = t.name == op.output ? t.size : out;
  if (out == in * members) return absl::OkStatus();
  return absl::InvalidArgumentError(
      fmt::format("all-gather \"{}\": output \"{}\" has {} bytes; {} members of {} bytes need {}",
                  op.name, op.output, out, members, in, in * members));
}

}  // namespace

NrtResult Runtime::LoadOps(nrt_model_t& model, uint32_t world) const {
  const CoreEngines engines = EnginesFor(node_.spec().chip->chip, node_.lnc(), node_.Perf());
  model.compute_ns = kLaunchNs;
  for (const Op& op : model.program->ops) {
    LoadedOp lop;
    lop.op = &op;
    model.flops += op.flops;
    model.macs += op.macs;
    if (op.engine == Engine::kCollectives) {
      absl::StatusOr<std::vector<uint32_t>> members = CollectiveMembers(op, model.rank, world);
      if (!members.ok()) return Fail(NRT_INVALID, std::string{members.status().message()});
      lop.members = *std::move(members);
      if (absl::Status s = CheckGatherOutput(*model.program, op, lop.members.size()); !s.ok()) {
        return Fail(NRT_INVALID, std::string{s.message()});
      }
    } else {
      const OpCost cost = CostOp(op, engines);
      lop.ns = cost.ns;
      lop.dma_ns = cost.dma_ns;
      model.compute_ns += lop.ns;
    }
    model.ops.push_back(std::move(lop));
  }
  return {};
}

NrtResult Runtime::ChargeModel(const nrt_model_t& model) {
  for (int i = 0; i < model.ncores; ++i) {
    absl::Status mem = ChargeModelOnCore(model, model.vnc + i);
    if (mem.ok()) continue;
    for (int j = 0; j < i; ++j) ReleaseModelOnCore(model, model.vnc + j);
    if (model.world) model.world->Leave(model.rank);
    accounting_->CountStatus(model.vnc + i, NRT_RESOURCE);
    Log()->error("nrt_load {}", std::string{mem.message()});
    return {NRT_RESOURCE, std::string{mem.message()}};
  }
  return {};
}

void Runtime::RegisterModel(nrt_model_t& model, size_t neff_bytes) {
  ledger_->ChargeHost(Loc(model.vnc).device, MemCategory::kCode, neff_bytes);
  model.id = next_model_id_++;
  for (int i = 0; i < model.ncores; ++i) {
    accounting_->CountModelLoad(model.vnc + i);
    NdsModel rec;
    rec.model_id = model.id;
    rec.name = model.name;
    rec.uuid = model.uuid;
    rec.nc_index = static_cast<uint8_t>(Loc(model.vnc + i).device_core);
    for (size_t c = 0; c < kMemCategories; ++c) {
      rec.memory[0][c] = {model.charged[c], model.charged[c] > 0 ? 1u : 0u};
    }
    accounting_->AddModelRecord(rec, model.vnc + i);
  }
}

absl::Status Runtime::ChargeModelOnCore(const nrt_model_t& model, int core) {
  const std::string what = fmt::format("NEFF \"{}\"", model.name);
  // The microcode comes with a core's first model (docs/hardware.md#device-memory).
  uint64_t code = model.charged[static_cast<int>(MemCategory::kCode)];
  if (models_per_core_[static_cast<size_t>(core)] == 0) {
    code += kMicrocodeBytesPerPhysicalCore * static_cast<uint64_t>(node_.lnc());
  }
  const uint64_t constants = model.charged[static_cast<int>(MemCategory::kConstants)];
  const uint64_t misc = model.charged[static_cast<int>(MemCategory::kMisc)];
  const uint64_t scratch = model.charged[static_cast<int>(MemCategory::kScratchpad)];
  auto& pads = scratchpads_[static_cast<size_t>(core)];
  const uint64_t pad = std::max(pads.empty() ? 0 : *pads.rbegin(), scratch);
  absl::Status s = ledger_->ChargeDevice(core, MemCategory::kCode, code, what);
  if (s.ok()) {
    s = ledger_->ChargeDevice(core, MemCategory::kConstants, constants, what);
    if (s.ok()) {
      s = ledger_->ChargeDevice(core, MemCategory::kMisc, misc, what);
      if (s.ok()) {
        s = ledger_->SetDevice(core, MemCategory::kScratchpad, pad, what);
        if (s.ok()) {
          pads.insert(scratch);
          ++models_per_core_[static_cast<size_t>(core)];
          return s;
        }
        ledger_->ReleaseDevice(core, MemCategory::kMisc, misc);
      }
      ledger_->ReleaseDevice(core, MemCategory::kConstants, constants);
    }
    ledger_->ReleaseDevice(core, MemCategory::kCode, code);
  }
  return s;
}

void Runtime::ReleaseModelOnCore(const nrt_model_t& model, int core) {
  for (MemCategory c : {MemCategory::kCode, MemCategory::kConstants, MemCategory::kMisc}) {
    ledger_->ReleaseDevice(core, c, model.charged[static_cast<int>(c)]);
  }
  if (--models_per_core_[static_cast<size_t>(core)] == 0) {
    ledger_->ReleaseDevice(core, MemCategory::kCode,
                           kMicrocodeBytesPerPhysicalCore * static_cast<uint64_t>(node_.lnc()));
  }
  auto& pads = scratchpads_[static_cast<size_t>(core)];
  pads.erase(pads.find(model.charged[static_cast<int>(MemCategory::kScratchpad)]));
  (void)ledger_->SetDevice(core, MemCategory::kScratchpad, pads.empty() ? 0 : *pads.rbegin(), "");
}

NrtResult Runtime::Unload(nrt_model_t* model) {
  std::lock_guard<std::mutex> lock(models_mu_);
  if (models_.erase(model) == 0) return {NRT_INVALID_HANDLE, "unknown model"};
  for (int i = 0; i < model->ncores; ++i) {
    ReleaseModelOnCore(*model, model->vnc + i);
    accounting_->RemoveModelRecord(model->id, model->vnc + i);
  }
  ledger_->ReleaseHost(
      Loc(model->vnc).device, MemCategory::kCode,
      model->charged[static_cast<int>(MemCategory::kCode)] - model->program->memory.code);
  if (model->world) model->world->Leave(model->rank);
  model->magic = 0;
  delete model;
  return {};
}

}  // namespace neuron::nrt
