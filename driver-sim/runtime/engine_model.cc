#include "driver-sim/runtime/engine_model.h"

#include <algorithm>
#include <cmath>

#include "nrt/nrt.h"

namespace neuron::nrt {
namespace {

// TensorE tiles (docs/hardware.md#core-parameters): a stationary tile of 128 (contraction) x 128
// (columns) and a moving tile of up to 512 columns; one instruction takes max(N, 64) cycles.
constexpr double kPartitions = 128;
constexpr double kMovingMax = 512;
constexpr double kMinIssueCycles = 64;
// VectorE/ScalarE/GpSimd: ~100 cycles of static overhead per instruction. An instruction covers
// at most a tile of 128 partitions x 512 elements: the free size of one PSUM bank (2 KiB per
// partition of FP32), which bounds every tile a matmul result is read from
// (docs/hardware.md#engine-model). An op of e element-passes is ceil(e / (128 x 512)) such
// instructions, each paying the overhead, so small tiles and short sequences pay it more often.
constexpr double kStaticOverheadCycles = 100;
constexpr double kInstructionFreeElements = 512;
// DMA: 16 engines per core, each sustaining 17 B/ns on trn1 and 23 B/ns on trn2 with large
// payloads (the NKI DMA bandwidth guide's table; the theoretical 27.2 GB/s per engine is not
// reached); every DMA pays ~1300 ns of descriptor setup and semaphore-to-start latency before
// its data moves, the same guide's figure (docs/hardware.md#engine-model).
constexpr double kDmaQueues = 16;
constexpr double kDmaEngineBytesPerSTrn1 = 17e9;
constexpr double kDmaEngineBytesPerSTrn2 = 23e9;
constexpr double kDmaStartSeconds = 1300e-9;

bool IsFp32(int dtype) {
  return dtype == NRT_DTYPE_FLOAT32 || dtype == NRT_DTYPE_FP32R || dtype == NRT_DTYPE_INT32 ||
         dtype == NRT_DTYPE_UINT32 || dtype == NRT_DTYPE_INT64 || dtype == NRT_DTYPE_UINT64;
}
bool IsFp8(int dtype) {
  return dtype == NRT_DTYPE_FP8_E3 || dtype == NRT_DTYPE_FP8_E4 || dtype == NRT_DTYPE_FP8_E5;
}

// Cycles of one [free x k] x [k x stationary] product, tiled as the array takes it.
double TileCycles(double free, double stationary, double k) {
  const double full = std::floor(free / kMovingMax);
  const double rest = free - full * kMovingMax;
  const double per_pass = full * kMovingMax + (rest > 0 ? std::max(rest, kMinIssueCycles) : 0);
  return std::ceil(k / kPartitions) * std::ceil(stationary / kPartitions) * per_pass;
}

// TensorE seconds: the tiled cycle count when the op gives its shape, its FLOPs at the array's
// peak otherwise; either way at the calibrated efficiency.
double TensorSeconds(const Op& op, const CoreEngines& e) {
  double cycles = 0;
  if (op.m > 0 && op.k > 0 && op.n > 0) {
    // The compiler picks the orientation with fewer cycles.
    cycles = op.batch * std::min(TileCycles(op.m, op.n, op.k), TileCycles(op.n, op.m, op.k));
  } else {
    cycles = op.flops / (2 * kPartitions * kPartitions);
  }
  if (IsFp32(op.dtype)) cycles *= e.fp32_slowdown;
  if (IsFp8(op.dtype)) cycles /= e.fp8_speedup;
  return cycles / (e.tensor_hz * e.lnc) / kTensorEfficiency;
}

double LaneSeconds(double elements, double lanes, double hz, int lnc) {
  return elements / (lanes * lnc) / hz;
}

// The static overhead of the instructions an op of `elements` element-passes issues: one per
// 128 x 512 tile (per logical core: LNC=2 splits the tiles over two cores), at least one.
double LaneOverheadSeconds(double elements, double hz, int lnc) {
  const double instructions =
      std::max(1.0, std::ceil(elements / (kPartitions * kInstructionFreeElements * lnc)));
  return instructions * kStaticOverheadCycles / hz;
}

}  // namespace

CoreEngines EnginesFor(Chip chip, int lnc, const CorePerf& perf) {
  CoreEngines e;
  e.lnc = std::max(lnc, 1);
  if (chip == Chip::kTrainium2) {
    e.tensor_hz = 2.4e9;
    e.vector_hz = 0.96e9;
    e.scalar_hz = 1.2e9;
    e.gpsimd_hz = 1.2e9;
    e.vector_lanes = 512;
    e.fp8_speedup = 2;
  } else {
    e.tensor_hz = 2.8e9;
    e.vector_hz = 1.12e9;
    e.scalar_hz = 1.4e9;
    e.gpsimd_hz = 1.4e9;
  }
  const double engine_bw =
      chip == Chip::kTrainium2 ? kDmaEngineBytesPerSTrn2 : kDmaEngineBytesPerSTrn1;
  e.dma_bytes_per_s = std::min(kDmaQueues * engine_bw * e.lnc, perf.mem_bw);
  e.vector_flops = perf.p_vector;
  e.scalar_flops = perf.p_scalar;
  return e;
}

const char* BoundName(Bound b) {
  switch (b) {
    case Bound::kCompute:
      return "compute";
    case Bound::kMemory:
      return "memory";
    case Bound::kLatency:
      return "latency";
  }
  return "?";
}

OpCost CostOp(const Op& op, const CoreEngines& e) {
  OpCost c;
  if (op.engine == Engine::kCollectives) return c;
  double compute = 0;
  double overhead = 0;
  switch (op.engine) {
    case Engine::kTensor:
      compute = TensorSeconds(op, e);
      overhead = kMinIssueCycles / e.tensor_hz;
      break;
    case Engine::kVector:
      compute = op.elements > 0 ? LaneSeconds(op.elements, e.vector_lanes, e.vector_hz, e.lnc)
                                : op.flops / e.vector_flops;
      overhead = LaneOverheadSeconds(op.elements, e.vector_hz, e.lnc);
      break;
    case Engine::kScalar:
      compute = op.elements > 0 ? LaneSeconds(op.elements, e.lanes, e.scalar_hz, e.lnc)
                                : op.flops / e.scalar_flops;
      overhead = LaneOverheadSeconds(op.elements, e.scalar_hz, e.lnc);
      break;
    case Engine::kGpSimd:
      compute = LaneSeconds(op.elements, e.lanes, e.gpsimd_hz, e.lnc);
      overhead = LaneOverheadSeconds(op.elements, e.gpsimd_hz, e.lnc);
      break;
    case Engine::kDma:
    case Engine::kCollectives:
      break;
  }
  const double dma = op.bytes / e.dma_bytes_per_s;
  if (op.bytes > 0) overhead += kDmaStartSeconds;
  if (compute == 0 && dma == 0) overhead = 0;  // an empty op issues nothing
  c.compute_ns = SecondsToNs(compute);
  c.dma_ns = SecondsToNs(dma);
  c.fixed_ns = SecondsToNs(overhead);
  c.ns = std::max(c.compute_ns, c.dma_ns) + c.fixed_ns;
  if (c.fixed_ns > std::max(c.compute_ns, c.dma_ns)) {
    c.bound = Bound::kLatency;
  } else {
    c.bound = c.dma_ns > c.compute_ns ? Bound::kMemory : Bound::kCompute;
  }
  return c;
}

ListCost CostOps(std::span<const Op> ops, const CoreEngines& e) {
  ListCost l;
  for (const Op& op : ops) {
    const OpCost c = CostOp(op, e);
    l.ns += c.ns;
    switch (c.bound) {
      case Bound::kCompute:
        l.compute_bound_ns += c.ns;
        break;
      case Bound::kMemory:
        l.memory_bound_ns += c.ns;
        break;
      case Bound::kLatency:
        l.latency_bound_ns += c.ns;
        break;
    }
    l.engine_busy_ns[static_cast<size_t>(op.engine)] += c.compute_ns;
    l.engine_busy_ns[static_cast<size_t>(Engine::kDma)] += c.dma_ns;
  }
  return l;
}

}  // namespace neuron::nrt
