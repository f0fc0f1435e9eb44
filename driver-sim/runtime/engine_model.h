#pragma once
// The NeuronCore engine model of docs/hardware.md#engine-model: what one op costs on the engines
// of a logical core. Each compute engine (TensorE, VectorE, ScalarE, GpSimd) has its own clock and
// width from docs/hardware.md#core-parameters; the DMA queues move the op's bytes between HBM and
// SBUF at min(16 queues' rate, the core's HBM share) and overlap the compute engine (the operands
// are double-buffered), so an op takes the longer of the two plus the engine's fixed issue latency
// and comes out compute-, memory- or latency-bound. Ops of one list form a dependency chain (see
// the blind spots in driver-sim/README.md#timing-model). Pure functions; thread-safe.

#include <array>
#include <cstdint>
#include <span>

#include "core/model/catalog.h"
#include "driver-sim/runtime/node_model.h"
#include "driver-sim/runtime/program.h"

namespace neuron::nrt {

// TensorE efficiency: the one calibration of the compute engines, from the NKI GEMM
// (docs/hardware.md#calibration-points row 1): [4096,8192]x[8192,8192] BF16 issues
// 64·32·16 full tiles of 512 cycles = 16,777,216 cycles, 5.992 ms at 2.8 GHz, measured 6.97 ms.
inline constexpr double kGemmCalibrationSeconds = 6.97e-3;
inline constexpr double kGemmCalibrationCycles = 64.0 * 32 * 16 * 512;
inline constexpr double kTensorEfficiency =
    kGemmCalibrationCycles / 2.8e9 / kGemmCalibrationSeconds;

// The engines of one logical core (a logical core at LNC=2 is two physical cores working on one
// op: twice the lanes and twice the HBM share).
struct CoreEngines {
  double tensor_hz = 0;      // TensorE clock
  double vector_hz = 0;      // VectorE clock
  double scalar_hz = 0;      // ScalarE clock
  double gpsimd_hz = 0;      // GpSimd clock
  int lanes = 128;           // elements ScalarE and GpSimd process per cycle (128 partitions)
  int vector_lanes = 128;    // elements VectorE processes per cycle (512 BF16 on NC-v3)
  int lnc = 1;               // physical cores per logical core
  double fp32_slowdown = 4;  // TensorE FP32 inputs take 4 passes
  double fp8_speedup = 1;    // TensorE FP8 rate relative to BF16 (2 on NC-v3)
  double dma_bytes_per_s = 0;
  // Ops given only as FLOPs (the op list's "vector"/"scalar" without "elements"): the engine's
  // published FP32 rate.
  double vector_flops = 0;
  double scalar_flops = 0;
};

// The engines of a logical core of `chip` at `lnc`; `perf` gives the logical core's HBM share and
// the FP32 rates of VectorE and ScalarE (NodeModel::Perf).
CoreEngines EnginesFor(Chip chip, int lnc, const CorePerf& perf);

enum class Bound : uint8_t { kCompute, kMemory, kLatency };
const char* BoundName(Bound b);  // "compute", "memory", "latency"

// One op on the core: its duration and what each engine was busy with (index: Engine).
struct OpCost {
  int64_t ns = 0;
  int64_t compute_ns = 0;  // the compute engine's busy time
  int64_t dma_ns = 0;      // the DMA queues' busy time, overlapped with compute
  int64_t fixed_ns = 0;    // the issue latency the op cannot overlap
  Bound bound = Bound::kCompute;
};

// Cost of one compute or DMA op; collectives cost 0 here (docs/hardware.md#collective-timing).
OpCost CostOp(const Op& op, const CoreEngines& e);

// The sum over an op list, by bound (ns): what predict reports as compute and memory time.
struct ListCost {
  int64_t ns = 0;
  int64_t compute_bound_ns = 0;
  int64_t memory_bound_ns = 0;
  int64_t latency_bound_ns = 0;
  std::array<int64_t, kEngineCount> engine_busy_ns{};
};
ListCost CostOps(std::span<const Op> ops, const CoreEngines& e);

}  // namespace neuron::nrt
