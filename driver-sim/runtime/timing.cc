#include "driver-sim/runtime/timing.h"

#include <algorithm>
#include <cmath>

#include "nrt/nrt.h"

namespace neuron::nrt {
namespace {

double PeakFor(int dtype, const CorePerf& p) {
  switch (dtype) {
    case NRT_DTYPE_FLOAT32:
    case NRT_DTYPE_FP32R:
    case NRT_DTYPE_INT32:
    case NRT_DTYPE_UINT32:
    case NRT_DTYPE_INT64:
    case NRT_DTYPE_UINT64:
      return p.p_fp32;
    case NRT_DTYPE_FP8_E3:
    case NRT_DTYPE_FP8_E4:
    case NRT_DTYPE_FP8_E5:
      return p.p_fp8;
    case NRT_DTYPE_INT8:
    case NRT_DTYPE_UINT8:
      return p.p_int8;
    default:
      return p.p_bf16;
  }
}

int64_t Ns(double seconds) { return static_cast<int64_t>(std::llround(seconds * 1e9)); }

}  // namespace

int64_t OpNs(const Op& op, const CorePerf& perf) {
  const double mem = op.bytes / (perf.mem_bw * kEtaMemory);
  switch (op.engine) {
    case Engine::kTensor:
      return Ns(std::max(op.flops / (PeakFor(op.dtype, perf) * kEtaCompute), mem));
    case Engine::kVector:
      return Ns(std::max(op.flops / perf.p_vector, mem));
    case Engine::kScalar:
      return Ns(std::max(op.flops / perf.p_scalar, mem));
    case Engine::kDma:
      return Ns(mem);
    case Engine::kCollectives:
      return 0;
  }
  return 0;
}

RingPath PathFor(const NodeModel& node, const std::vector<int>& devices, bool crosses_efa) {
  bool one_device = true;
  for (int d : devices) one_device = one_device && d == devices.front();
  RingPath path;
  path.beta_bytes_per_s = one_device ? node.Perf().mem_bw : node.LinkBytesPerS();
  if (crosses_efa) {
    path.alpha_s = kAlphaInterNodeS;
    path.beta_bytes_per_s = std::min(path.beta_bytes_per_s, node.EfaShareBytesPerS());
  }
  return path;
}

double CollectiveWireBytes(CollKind kind, double bytes, uint64_t ranks) {
  if (ranks <= 1) return 0;
  const double n = static_cast<double>(ranks);
  const double factor = kind == CollKind::kAllReduce ? 2.0 : 1.0;
  return factor * (n - 1) / n * bytes;
}

int64_t CollectiveNs(CollKind kind, double bytes, uint64_t ranks, const RingPath& path) {
  if (ranks <= 1) return 0;
  const double steps = (kind == CollKind::kAllReduce ? 2.0 : 1.0) * static_cast<double>(ranks - 1);
  return Ns(steps * path.alpha_s + CollectiveWireBytes(kind, bytes, ranks) / path.beta_bytes_per_s);
}

}  // namespace neuron::nrt
