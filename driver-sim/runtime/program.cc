#include "driver-sim/runtime/program.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <tuple>

#include "driver-sim/runtime/comm_table.h"
#include "driver-sim/runtime/rendezvous.h"
#include "nrt/nrt.h"

namespace neuron::nrt {
namespace {

using json = nlohmann::json;

// Header offsets (docs/runtime.md#neff-header).
constexpr size_t kOffPkgVersion = 0;
constexpr size_t kOffHeaderSize = 8;
constexpr size_t kOffDataSize = 16;
constexpr size_t kOffMajor = 24;
constexpr size_t kOffMinor = 32;
constexpr size_t kOffBuild = 40;
constexpr size_t kOffNumTpb = 168;
constexpr size_t kOffHash = 172;
constexpr size_t kOffUuid = 204;
constexpr size_t kOffName = 220;
constexpr size_t kOffRequestedTpb = 476;
constexpr size_t kOffFeatureBits = 544;
constexpr size_t kOffLncSize = 552;

template <typename T>
void Put(uint8_t* base, size_t off, T v) {
  std::memcpy(base + off, &v, sizeof(T));
}
template <typename T>
T Get(const char* base, size_t off) {
  T v;
  std::memcpy(&v, base + off, sizeof(T));
  return v;
}
void PutString(uint8_t* base, size_t off, size_t field, std::string_view s) {
  std::memcpy(base + off, s.data(), std::min(s.size(), field - 1));
}
std::string GetString(const char* base, size_t off, size_t field) {
  const char* p = base + off;
  return std::string(p, strnlen(p, field));
}

struct DtypeName {
  const char* name;
  int value;
};
constexpr DtypeName kDtypes[] = {
    {"bfloat16", NRT_DTYPE_BFLOAT16}, {"bf16", NRT_DTYPE_BFLOAT16},
    {"float16", NRT_DTYPE_FLOAT16},   {"fp16", NRT_DTYPE_FLOAT16},
    {"float32", NRT_DTYPE_FLOAT32},   {"fp32", NRT_DTYPE_FLOAT32},
    {"fp8_e4", NRT_DTYPE_FP8_E4},     {"fp8", NRT_DTYPE_FP8_E4},
    {"fp8_e5", NRT_DTYPE_FP8_E5},     {"fp8_e3", NRT_DTYPE_FP8_E3},
    {"int8", NRT_DTYPE_INT8},         {"uint8", NRT_DTYPE_UINT8},
    {"int16", NRT_DTYPE_INT16},       {"uint16", NRT_DTYPE_UINT16},
    {"int32", NRT_DTYPE_INT32},       {"uint32", NRT_DTYPE_UINT32},
    {"int64", NRT_DTYPE_INT64},       {"uint64", NRT_DTYPE_UINT64},
};

// Parsing context: builds error messages that name the JSON path.
struct Parser {
  std::vector<Op>* ops;
  bool has_collectives = false;
  bool has_data = false;

  static absl::Status Err(const std::string& path, std::string_view what) {
    return absl::InvalidArgumentError(fmt::format("op list: {}: {}", path, what));
  }

  static absl::StatusOr<double> Number(const json& obj, const std::string& path, const char* key,
                                       std::optional<double> dflt) {
    const auto it = obj.find(key);
    if (it == obj.end()) {
      if (dflt) return *dflt;
      return Err(path + "." + key, "required");
    }
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0) {
      return Err(path + "." + key, "expected a non-negative number");
    }
    return it->get<double>();
  }

  static absl::StatusOr<int> Dtype(const json& obj, const std::string& path) {
    const auto it = obj.find("dtype");
    if (it == obj.end()) return NRT_DTYPE_BFLOAT16;
    if (it->is_string()) {
      const std::string s = it->get<std::string>();
      for (const DtypeName& d : kDtypes) {
        if (s == d.name) return d.value;
      }
    }
    return Err(path + ".dtype",
               "expected one of bfloat16, float16, float32, fp8_e4, fp8_e5, "
               "fp8_e3, int8, uint8, int16, uint16, int32, uint32, int64, uint64");
  }

  absl::Status Push(const Op& op, uint64_t count, const std::string& path) {
    if (ops->size() + count > kMaxOps) {
      return Err(path, fmt::format("more than {} ops after expanding repeats", kMaxOps));
    }
    for (uint64_t i = 0; i < count; ++i) ops->push_back(op);
    return absl::OkStatus();
  }

  absl::Status ParseOps(const json& list, const std::string& path) {
    if (!list.is_array()) return Err(path, "expected an array");
    for (size_t i = 0; i < list.size(); ++i) {
      if (absl::Status s = ParseOp(list[i], fmt::format("{}[{}]", path, i)); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::Status ParseOp(const json& o, const std::string& path) {
    if (!o.is_object()) return Err(path, "expected an object");
    const auto kind_it = o.find("op");
    if (kind_it == o.end() || !kind_it->is_string()) return Err(path + ".op", "required string");
    const std::string kind = kind_it->get<std::string>();
    absl::StatusOr<double> count = Number(o, path, "count", 1.0);
    if (!count.ok()) return count.status();
    if (*count != std::floor(*count) || *count > static_cast<double>(kMaxOps)) {
      return Err(path + ".count", "expected a whole number of at most 1000000");
    }
    const auto n = static_cast<uint64_t>(*count);
    if (kind == "repeat") {
      const auto body = o.find("ops");
      if (body == o.end()) return Err(path + ".ops", "required");
      for (uint64_t i = 0; i < n; ++i) {
        if (absl::Status s = ParseOps(*body, path + ".ops"); !s.ok()) return s;
      }
      return absl::OkStatus();
    }
    Op op;
    op.name = kind;
    if (const auto it = o.find("name"); it != o.end()) {
      if (!it->is_string()) return Err(path + ".name", "expected a string");
      op.name = it->get<std::string>();
    }
    absl::StatusOr<int> dtype = Dtype(o, path);
    if (!dtype.ok()) return dtype.status();
    op.dtype = *dtype;
    if (kind == "matmul") {
      absl::StatusOr<double> m = Number(o, path, "m", std::nullopt);
      absl::StatusOr<double> k = Number(o, path, "k", std::nullopt);
      absl::StatusOr<double> nn = Number(o, path, "n", std::nullopt);
      absl::StatusOr<double> batch = Number(o, path, "batch", 1.0);
      for (const auto* v : {&m, &k, &nn, &batch}) {
        if (!v->ok()) return v->status();
      }
      op.engine = Engine::kTensor;
      op.m = *m;
      op.k = *k;
      op.n = *nn;
      op.batch = *batch;
      op.macs = *batch * *m * *k * *nn;
      op.flops = 2 * op.macs;
      // Each operand crosses HBM once unless the op says otherwise (resident operands).
      absl::StatusOr<double> b =
          Number(o, path, "bytes", *batch * DtypeSize(op.dtype) * (*m * *k + *k * *nn + *m * *nn));
      if (!b.ok()) return b.status();
      op.bytes = *b;
      if (absl::Status s = ParseMatmulData(o, path, &op); !s.ok()) return s;
    } else if (kind == "tensor" || kind == "vector" || kind == "scalar" || kind == "gpsimd") {
      absl::StatusOr<double> f = Number(o, path, "flops", 0.0);
      absl::StatusOr<double> b = Number(o, path, "bytes", 0.0);
      absl::StatusOr<double> e = Number(o, path, "elements", 0.0);
      if (!f.ok()) return f.status();
      if (!b.ok()) return b.status();
      if (!e.ok()) return e.status();
      op.engine = kind == "tensor"   ? Engine::kTensor
                  : kind == "vector" ? Engine::kVector
                  : kind == "scalar" ? Engine::kScalar
                                     : Engine::kGpSimd;
      op.flops = *f;
      op.bytes = *b;
      op.elements = op.engine == Engine::kTensor ? 0 : *e;
      if (op.engine == Engine::kTensor) op.macs = *f / 2;
    } else if (kind == "dma") {
      absl::StatusOr<double> b = Number(o, path, "bytes", std::nullopt);
      if (!b.ok()) return b.status();
      op.engine = Engine::kDma;
      op.bytes = *b;
    } else if (kind == "allreduce" || kind == "allgather" || kind == "reducescatter") {
      if (absl::Status s = ParseCollective(o, path, kind, &op); !s.ok()) return s;
    } else {
      return Err(path + ".op",
                 fmt::format("unknown op \"{}\" (matmul, tensor, vector, scalar, "
                             "gpsimd, dma, allreduce, allgather, reducescatter, repeat)",
                             kind));
    }
    return Push(op, n, path);
  }

  // A matmul's optional tensors: all three names or none (their shapes are checked once the
  // inputs and outputs are known, CheckMatmulTensors).
  absl::Status ParseMatmulData(const json& o, const std::string& path, Op* op) {
    int given = 0;
    for (auto [key, dst] : {std::pair{"input", &op->input}, std::pair{"weights", &op->weights},
                            std::pair{"output", &op->output}}) {
      const auto it = o.find(key);
      if (it == o.end()) continue;
      if (!it->is_string() || it->get<std::string>().empty()) {
        return Err(path + "." + key, "expected a tensor name");
      }
      *dst = it->get<std::string>();
      ++given;
    }
    if (given != 0 && given != 3) {
      return Err(path, "give input, weights and output tensors, or none");
    }
    if (given == 3 && (op->batch != 1 || op->m > kMaxDataMatmulDim || op->k > kMaxDataMatmulDim ||
                       op->n > kMaxDataMatmulDim)) {
      return Err(path, fmt::format("a matmul with data has batch 1 and m, k, n of at most {}",
                                   kMaxDataMatmulDim));
    }
    has_data = has_data || given == 3;
    return absl::OkStatus();
  }

  absl::Status ParseCollective(const json& o, const std::string& path, const std::string& kind,
                               Op* op) {
    op->engine = Engine::kCollectives;
    op->coll = kind == "allreduce"   ? CollKind::kAllReduce
               : kind == "allgather" ? CollKind::kAllGather
                                     : CollKind::kReduceScatter;
    absl::StatusOr<double> b = Number(o, path, "bytes", std::nullopt);
    if (!b.ok()) return b.status();
    op->bytes = *b;
    if (const auto it = o.find("groups"); it != o.end()) {
      if (!it->is_array() || it->empty()) return Err(path + ".groups", "expected groups of ranks");
      std::vector<uint32_t> seen;
      for (size_t g = 0; g < it->size(); ++g) {
        const json& grp = (*it)[g];
        const std::string gp = fmt::format("{}.groups[{}]", path, g);
        if (!grp.is_array() || grp.empty()) return Err(gp, "expected a non-empty array of ranks");
        std::vector<uint32_t> ranks;
        for (const json& r : grp) {
          if (!r.is_number_unsigned()) return Err(gp, "ranks are non-negative integers");
          ranks.push_back(r.get<uint32_t>());
        }
        for (uint32_t r : ranks) {
          if (std::find(seen.begin(), seen.end(), r) != seen.end()) {
            return Err(gp, fmt::format("rank {} is in more than one group", r));
          }
          seen.push_back(r);
        }
        op->groups.push_back(std::move(ranks));
      }
    }
    const bool has_nodes = o.contains("nodes");
    const bool has_remote = o.contains("remote_ranks");
    if (has_nodes && has_remote) return Err(path, "give nodes or remote_ranks, not both");
    absl::StatusOr<double> nodes = Number(o, path, "nodes", 1.0);
    absl::StatusOr<double> remote = Number(o, path, "remote_ranks", 0.0);
    if (!nodes.ok()) return nodes.status();
    if (!remote.ok()) return remote.status();
    if (*nodes < 1 || *nodes > 4096 || *nodes != std::floor(*nodes)) {
      return Err(path + ".nodes", "expected a whole number from 1 to 4096");
    }
    if (*remote > 1048576 || *remote != std::floor(*remote)) {
      return Err(path + ".remote_ranks", "expected a whole number of at most 1048576");
    }
    op->nodes = static_cast<uint32_t>(*nodes);
    op->remote_ranks = static_cast<uint32_t>(*remote);
    for (auto [key, dst] : {std::pair{"input", &op->input}, std::pair{"output", &op->output}}) {
      const auto it = o.find(key);
      if (it == o.end()) continue;
      if (!it->is_string() || it->get<std::string>().empty()) {
        return Err(path + "." + key, "expected a tensor name");
      }
      *dst = it->get<std::string>();
    }
    if (op->input.empty() != op->output.empty()) {
      return Err(path, "give both input and output tensors, or neither");
    }
    if (!op->input.empty() && op->coll == CollKind::kReduceScatter) {
      return Err(path + ".input", "tensors are taken by allreduce and allgather only");
    }
    has_collectives = true;
    return absl::OkStatus();
  }

  static absl::Status ParseTensors(const json& doc, const char* key, std::vector<TensorSpec>* out) {
    const auto it = doc.find(key);
    if (it == doc.end()) return absl::OkStatus();
    if (!it->is_array()) return Err(key, "expected an array");
    for (size_t i = 0; i < it->size(); ++i) {
      const json& t = (*it)[i];
      const std::string path = fmt::format("{}[{}]", key, i);
      if (!t.is_object()) return Err(path, "expected an object");
      TensorSpec spec;
      const auto name = t.find("name");
      if (name == t.end() || !name->is_string() || name->get<std::string>().empty() ||
          name->get<std::string>().size() > 255) {
        return Err(path + ".name", "required string of 1-255 bytes");
      }
      spec.name = name->get<std::string>();
      for (const TensorSpec& other : *out) {
        if (other.name == spec.name) return Err(path + ".name", "duplicate tensor name");
      }
      absl::StatusOr<int> dtype = Dtype(t, path);
      if (!dtype.ok()) return dtype.status();
      spec.dtype = *dtype;
      const auto shape = t.find("shape");
      if (shape == t.end() || !shape->is_array()) return Err(path + ".shape", "required array");
      uint64_t elems = 1;
      for (const json& d : *shape) {
        if (!d.is_number_unsigned() || d.get<uint64_t>() > (1ull << 32)) {
          return Err(path + ".shape", "dimensions are non-negative integers");
        }
        spec.shape.push_back(d.get<uint32_t>());
        elems *= d.get<uint64_t>();
        if (elems > (1ull << 40)) return Err(path + ".shape", "tensor larger than 1 TiB");
      }
      spec.size = elems * static_cast<uint64_t>(DtypeSize(spec.dtype));
      out->push_back(std::move(spec));
    }
    return absl::OkStatus();
  }
};

}  // namespace

int DtypeSize(int dtype) {
  switch (dtype) {
    case NRT_DTYPE_INT8:
    case NRT_DTYPE_UINT8:
    case NRT_DTYPE_FP8_E3:
    case NRT_DTYPE_FP8_E4:
    case NRT_DTYPE_FP8_E5:
      return 1;
    case NRT_DTYPE_INT16:
    case NRT_DTYPE_UINT16:
    case NRT_DTYPE_FLOAT16:
    case NRT_DTYPE_BFLOAT16:
      return 2;
    case NRT_DTYPE_INT32:
    case NRT_DTYPE_UINT32:
    case NRT_DTYPE_FLOAT32:
    case NRT_DTYPE_FP32R:
      return 4;
    case NRT_DTYPE_INT64:
    case NRT_DTYPE_UINT64:
      return 8;
    default:
      return 0;
  }
}

const char* EngineName(Engine e) {
  switch (e) {
    case Engine::kTensor:
      return "TensorE";
    case Engine::kVector:
      return "VectorE";
    case Engine::kScalar:
      return "ScalarE";
    case Engine::kDma:
      return "DMA";
    case Engine::kCollectives:
      return "Collectives";
    case Engine::kGpSimd:
      return "GpSimd";
  }
  return "?";
}

const char* CollKindName(CollKind k) {
  switch (k) {
    case CollKind::kAllReduce:
      return "allreduce";
    case CollKind::kAllGather:
      return "allgather";
    case CollKind::kReduceScatter:
      return "reducescatter";
  }
  return "?";
}

std::array<uint8_t, 32> PayloadHash(std::string_view payload) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : payload) {
    h ^= c;
    h *= 1099511628211ull;
  }
  std::array<uint8_t, 32> out{};
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(h >> (8 * (i % 8)));
  return out;
}

std::array<uint8_t, kNeffHeaderSize> EncodeNeffHeader(const NeffHeader& h) {
  std::array<uint8_t, kNeffHeaderSize> out{};
  uint8_t* b = out.data();
  Put<uint64_t>(b, kOffPkgVersion, h.pkg_version);
  Put<uint64_t>(b, kOffHeaderSize, h.header_size);
  Put<uint64_t>(b, kOffDataSize, h.data_size);
  Put<uint64_t>(b, kOffMajor, h.neff_version_major);
  Put<uint64_t>(b, kOffMinor, h.neff_version_minor);
  PutString(b, kOffBuild, 128, h.build_version);
  Put<uint32_t>(b, kOffNumTpb, h.num_tpb);
  std::memcpy(b + kOffHash, h.hash.data(), h.hash.size());
  std::memcpy(b + kOffUuid, h.uuid.data(), h.uuid.size());
  PutString(b, kOffName, 256, h.name);
  Put<uint32_t>(b, kOffRequestedTpb, h.requested_tpb_count);
  Put<uint64_t>(b, kOffFeatureBits, h.feature_bits);
  Put<uint32_t>(b, kOffLncSize, h.lnc_size);
  return out;
}

absl::StatusOr<NeffHeader> DecodeNeffHeader(std::string_view bytes) {
  if (bytes.size() < kNeffHeaderSize) {
    return absl::InvalidArgumentError(fmt::format(
        "NEFF of {} bytes is shorter than its {}-byte header", bytes.size(), kNeffHeaderSize));
  }
  const char* b = bytes.data();
  NeffHeader h;
  h.pkg_version = Get<uint64_t>(b, kOffPkgVersion);
  h.header_size = Get<uint64_t>(b, kOffHeaderSize);
  h.data_size = Get<uint64_t>(b, kOffDataSize);
  h.neff_version_major = Get<uint64_t>(b, kOffMajor);
  h.neff_version_minor = Get<uint64_t>(b, kOffMinor);
  h.build_version = GetString(b, kOffBuild, 128);
  h.num_tpb = Get<uint32_t>(b, kOffNumTpb);
  std::memcpy(h.hash.data(), b + kOffHash, h.hash.size());
  std::memcpy(h.uuid.data(), b + kOffUuid, h.uuid.size());
  h.name = GetString(b, kOffName, 256);
  h.requested_tpb_count = Get<uint32_t>(b, kOffRequestedTpb);
  h.feature_bits = Get<uint64_t>(b, kOffFeatureBits);
  h.lnc_size = Get<uint32_t>(b, kOffLncSize);
  if (h.header_size != kNeffHeaderSize) {
    return absl::InvalidArgumentError(
        fmt::format("NEFF header_size is {}, expected {}", h.header_size, kNeffHeaderSize));
  }
  if (h.data_size != bytes.size() - kNeffHeaderSize) {
    return absl::InvalidArgumentError(
        fmt::format("NEFF data_size is {} but {} bytes follow the header", h.data_size,
                    bytes.size() - kNeffHeaderSize));
  }
  return h;
}

namespace {

// A collective's tensors name the op list's own inputs and outputs, hold a type a sum
// understands, and fit in what a rank may bring (rendezvous.h). An all-gather's output size
// depends on its group and is checked at load.
absl::Status CheckCollectiveTensors(Program& p) {
  auto find = [](const std::vector<TensorSpec>& specs, const std::string& name) {
    const auto it = std::find_if(specs.begin(), specs.end(),
                                 [&](const TensorSpec& t) { return t.name == name; });
    return it == specs.end() ? nullptr : &*it;
  };
  for (Op& op : p.ops) {
    if (op.input.empty() || op.engine != Engine::kCollectives) continue;
    const std::string where = fmt::format("ops: collective \"{}\"", op.name);
    const TensorSpec* in = find(p.inputs, op.input);
    const TensorSpec* out = find(p.outputs, op.output);
    if (in == nullptr) {
      return Parser::Err(where, fmt::format("input \"{}\" is not in inputs", op.input));
    }
    if (out == nullptr) {
      return Parser::Err(where, fmt::format("output \"{}\" is not in outputs", op.output));
    }
    if (op.coll == CollKind::kAllReduce &&
        (!CanSum(in->dtype) || out->dtype != in->dtype || out->size != in->size)) {
      return Parser::Err(where,
                         "an all-reduce's input and output have one size and a summable type "
                         "(float32, bfloat16, int32, uint32, int64, uint64)");
    }
    if (in->size > kMaxRankDataBytes) {
      return Parser::Err(where, fmt::format("input of {} bytes; a rank brings at most {}", in->size,
                                            kMaxRankDataBytes));
    }
    op.data_dtype = in->dtype;
  }
  return absl::OkStatus();
}

// A matmul with data reads float32 inputs of exactly [m,k] and [k,n] elements and writes a
// float32 output of [m,n]: the executor computes it without a bounds check of its own.
absl::Status CheckMatmulTensors(const Program& p) {
  auto find = [](const std::vector<TensorSpec>& specs, const std::string& name) {
    const auto it = std::find_if(specs.begin(), specs.end(),
                                 [&](const TensorSpec& t) { return t.name == name; });
    return it == specs.end() ? nullptr : &*it;
  };
  for (const Op& op : p.ops) {
    if (op.weights.empty()) continue;
    const std::string where = fmt::format("ops: matmul \"{}\"", op.name);
    const auto elems = [](double a, double b) { return static_cast<uint64_t>(a * b) * 4; };
    const std::array<std::tuple<const TensorSpec*, const std::string*, uint64_t>, 3> want{{
        {find(p.inputs, op.input), &op.input, elems(op.m, op.k)},
        {find(p.inputs, op.weights), &op.weights, elems(op.k, op.n)},
        {find(p.outputs, op.output), &op.output, elems(op.m, op.n)},
    }};
    for (const auto& [spec, name, bytes] : want) {
      if (spec == nullptr) {
        return Parser::Err(where, fmt::format("tensor \"{}\" is not among the inputs (input, "
                                              "weights) or outputs (output)",
                                              *name));
      }
      if (spec->dtype != NRT_DTYPE_FLOAT32 || spec->size != bytes) {
        return Parser::Err(where,
                           fmt::format("tensor \"{}\" must be float32 of {} bytes", *name, bytes));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Program> ParseOpList(std::string_view text) {
  json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return absl::InvalidArgumentError("op list: not valid JSON");
  if (!doc.is_object()) return absl::InvalidArgumentError("op list: expected a JSON object");
  const auto version = doc.find("version");
  if (version == doc.end() || !version->is_number_integer() || version->get<int>() != 1) {
    return absl::InvalidArgumentError("op list: version: expected 1");
  }
  Program p;
  if (absl::Status s = Parser::ParseTensors(doc, "inputs", &p.inputs); !s.ok()) return s;
  if (absl::Status s = Parser::ParseTensors(doc, "outputs", &p.outputs); !s.ok()) return s;
  if (const auto mem = doc.find("memory"); mem != doc.end()) {
    if (!mem->is_object()) return Parser::Err("memory", "expected an object");
    for (const auto& [key, val] : mem->items()) {
      uint64_t* dst = key == "code"         ? &p.memory.code
                      : key == "constants"  ? &p.memory.constants
                      : key == "scratchpad" ? &p.memory.scratchpad
                      : key == "misc"       ? &p.memory.misc
                                            : nullptr;
      if (dst == nullptr) {
        return Parser::Err("memory." + key, "unknown category (code, constants, scratchpad, misc)");
      }
      if (!val.is_number() || val.get<double>() < 0 || val.get<double>() > 1e15) {
        return Parser::Err("memory." + key, "expected a number of bytes");
      }
      *dst = static_cast<uint64_t>(val.get<double>());
    }
  }
  const auto ops = doc.find("ops");
  if (ops == doc.end()) return Parser::Err("ops", "required");
  Parser parser{&p.ops};
  if (absl::Status s = parser.ParseOps(*ops, "ops"); !s.ok()) return s;
  p.has_collectives = parser.has_collectives;
  p.has_data = parser.has_data;
  if (absl::Status s = CheckCollectiveTensors(p); !s.ok()) return s;
  if (absl::Status s = CheckMatmulTensors(p); !s.ok()) return s;
  return p;
}

}  // namespace neuron::nrt
