#pragma once
// The timing model of docs/hardware.md#timing-model / docs/runtime.md#execution-time, #collectives:
// a launch cost per execution, a roofline cost per op, and the ring model for collectives. Pure
// functions; thread-safe.

#include <cstdint>
#include <vector>

#include "driver-sim/runtime/node_model.h"
#include "driver-sim/runtime/program.h"

namespace neuron::nrt {

inline constexpr int64_t kLaunchNs = 60000;  // 50 us host submit + 10 us device start
// Reproduces the 6.97 ms GEMM (docs/hardware.md#calibration-points)
inline constexpr double kEtaCompute = 0.86;
inline constexpr double kEtaMemory = 0.8;
inline constexpr double kAlphaIntraNodeS = 1.5e-6;  // per ring step over NeuronLink
inline constexpr double kAlphaInterNodeS = 15e-6;   // per ring step when the ring crosses EFA

// Duration of one compute or DMA op on a core: max(F / (P·η_c), B / (W·η_m)) for TensorE,
// max(F / P_engine, B / (W·η_m)) for VectorE and ScalarE, B / (W·η_m) for DMA. 0 for
// collectives (see CollectiveNs).
int64_t OpNs(const Op& op, const CorePerf& perf);

// Where a ring runs: alpha per step and beta, the slowest hop's bandwidth.
struct RingPath {
  double alpha_s = kAlphaIntraNodeS;
  double beta_bytes_per_s = 1;
};

// The ring over `devices` (one per rank, ring order): within one device it moves through the
// core's HBM, between devices over NeuronLink (one link's bandwidth); a ring that also crosses
// EFA pays the inter-node alpha and at most the node's EFA share per rank.
RingPath PathFor(const NodeModel& node, const std::vector<int>& devices, bool crosses_efa);

// Ring cost of one collective of S bytes over `ranks` ranks: all-reduce 2(N−1)·α +
// 2(N−1)/N·S/β; all-gather and reduce-scatter half of that. 0 for one rank.
int64_t CollectiveNs(CollKind kind, double bytes, uint64_t ranks, const RingPath& path);
// Bytes one rank sends (and receives) in that collective: 2(N−1)/N·S or (N−1)/N·S.
double CollectiveWireBytes(CollKind kind, double bytes, uint64_t ranks);

}  // namespace neuron::nrt
