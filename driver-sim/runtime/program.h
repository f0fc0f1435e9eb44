#pragma once
// A simulated NEFF (driver-sim/README.md, "Simulated NEFF and the op list"): the real 1024-byte
// header (docs/runtime.md#neff-header) and the op list that stands in for the tarball, parsed into
// a Program. Thread-safe (pure functions; a Program is immutable once parsed).

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace neuron::nrt {

inline constexpr size_t kNeffHeaderSize = 1024;
inline constexpr uint64_t kNeffMinMajor = 1;  // versions nrt_load accepts
inline constexpr uint64_t kNeffMaxMajor = 2;

// The header fields at their offsets (docs/runtime.md#neff-header, little-endian, natural
// alignment).
struct NeffHeader {
  uint64_t pkg_version = 1;
  uint64_t header_size = kNeffHeaderSize;
  uint64_t data_size = 0;
  uint64_t neff_version_major = 2;
  uint64_t neff_version_minor = 0;
  std::string build_version = "nrtsim";  // 128 bytes
  uint32_t num_tpb = 1;
  std::array<uint8_t, 32> hash{};
  std::array<uint8_t, 16> uuid{};
  std::string name;  // 256 bytes
  uint32_t requested_tpb_count = 1;
  uint64_t feature_bits = 0;
  uint32_t lnc_size = 0;
};

std::array<uint8_t, kNeffHeaderSize> EncodeNeffHeader(const NeffHeader& h);
// InvalidArgument when `bytes` is shorter than the header or the sizes disagree with it.
absl::StatusOr<NeffHeader> DecodeNeffHeader(std::string_view bytes);
// FNV-1a-64 of the payload repeated to 32 bytes (the sim's `hash`).
std::array<uint8_t, 32> PayloadHash(std::string_view payload);

// GpSimd comes last so that the trace's track numbers of the older engines stay put.
enum class Engine : uint8_t { kTensor, kVector, kScalar, kDma, kCollectives, kGpSimd };
inline constexpr int kEngineCount = 6;
// "TensorE", "VectorE", "ScalarE", "DMA", "Collectives", "GpSimd"
const char* EngineName(Engine e);

enum class CollKind : uint8_t { kAllReduce, kAllGather, kReduceScatter };
const char* CollKindName(CollKind k);  // "allreduce", ...

struct TensorSpec {
  std::string name;
  int dtype = 0;  // nrt_dtype_t
  std::vector<uint32_t> shape;
  uint64_t size = 0;  // bytes
};

struct Op {
  Engine engine = Engine::kTensor;
  int dtype = 0x6;  // NRT_DTYPE_BFLOAT16
  double flops = 0;
  double bytes = 0;
  double macs = 0;  // TensorE only
  // matmul: [m,k] x [k,n], `batch` times (the engine model tiles them,
  // docs/hardware.md#engine-model)
  double m = 0;
  double k = 0;
  double n = 0;
  double batch = 1;
  // VectorE, ScalarE and GpSimd: element-passes (one element through one instruction); 0 when the
  // op gives FLOPs only.
  double elements = 0;
  std::string name;
  // Collectives.
  CollKind coll = CollKind::kAllReduce;
  std::vector<std::vector<uint32_t>> groups;  // empty: the whole world
  uint32_t nodes = 1;
  uint32_t remote_ranks = 0;
  // Optional data: the input tensor whose bytes the rank brings and the output tensor that gets
  // the group's sum (all-reduce) or concatenation in group order (all-gather); `data_dtype` is
  // the input's element type.
  std::string input;
  std::string output;
  int data_dtype = 0;
  // matmul with data: `input` [m,k] times `weights` [k,n] into `output` [m,n], float32 tensors of
  // the op list's own inputs and outputs, computed for real by the executor (the health check's
  // known result, driver-sim/README.md); batch 1 and each dimension at most kMaxDataMatmulDim.
  std::string weights;
};

// A data-carrying matmul's largest dimension: 64x64x64 is 262144 multiply-adds on the host, a
// fraction of a millisecond, so such an op never dominates an execution's wall time.
inline constexpr double kMaxDataMatmulDim = 64;

struct ProgramMemory {
  uint64_t code = 0;
  uint64_t constants = 0;
  uint64_t scratchpad = 0;
  uint64_t misc = 0;
};

struct Program {
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  ProgramMemory memory;
  std::vector<Op> ops;  // flat: `repeat` and `count` expanded
  bool has_collectives = false;
  bool has_data = false;  // a matmul with data: the executor computes its output
};

inline constexpr size_t kMaxOps = 1000000;

// Parses the op list (version 1). InvalidArgument naming the JSON path of the first problem,
// e.g. "ops[3].m: expected a non-negative number".
absl::StatusOr<Program> ParseOpList(std::string_view json);

// Element size in bytes of an nrt_dtype_t value, 0 for unknown.
int DtypeSize(int dtype);

}  // namespace neuron::nrt
