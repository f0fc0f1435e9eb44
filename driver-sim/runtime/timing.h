#pragma once
// The collective model of docs/hardware.md#collective-timing and the launch cost of an execution
// (docs/runtime.md#execution-time); the engines' op costs are in engine_model.h. A collective is
// hierarchical as the Neuron runtime's are: within a node a ring over NeuronLink, between nodes
// over EFA on each rank's shard, then the ring again. Pure functions; thread-safe.

#include <cstdint>

#include "driver-sim/runtime/node_model.h"
#include "driver-sim/runtime/program.h"

namespace neuron::nrt {

inline constexpr int64_t kLaunchNs = 60000;  // 50 us host submit + 10 us device start

// Per ring step between the cores of one chip and between nodes
// (docs/hardware.md#collective-timing: 1-2 us over NeuronLink, ~15 us EFA HBM to HBM).
inline constexpr double kAlphaIntraNodeS = 1.5e-6;
inline constexpr double kAlphaInterNodeS = 15e-6;

// nccom-test times one execution of a graph holding the collective, so every figure it reports
// includes the launch (its 2-rank all-reduce bottoms out at 58 us below 64 KiB).
inline constexpr double kLaunchS = static_cast<double>(kLaunchNs) * 1e-9;
// Calibration, intra-node bandwidth (docs/hardware.md#collective-calibration): nccom-test's
// all-reduce of 1 GiB (1073741824 B, as its table prints) over 2 ranks of one trn1.32xlarge, the
// two cores of one chip, takes 18,930 us; a ring of 2 moves S bytes per rank in 2 steps, so one
// rank's ring bandwidth is S / (t - t_launch - 2·α).
inline constexpr double kNccomTwoRankBytes = 1073741824.0;
inline constexpr double kNccomTwoRankSeconds = 18930e-6;
inline constexpr double kIntraRingBytesPerS =
    kNccomTwoRankBytes / (kNccomTwoRankSeconds - kLaunchS - 2 * kAlphaIntraNodeS);
// Calibration, the step of a ring that crosses chips: nccom-test's all-gather of 1 KiB over the
// 32 ranks of one trn1.32xlarge (16 chips) takes 151 us: the launch, 31 steps and the 31/32 KiB
// each rank sends.
inline constexpr double kNccomChipRingSeconds = 151e-6;
inline constexpr double kAlphaChipToChipS =
    (kNccomChipRingSeconds - kLaunchS - 1024.0 * 31 / 32 / kIntraRingBytesPerS) / 31;
// trn1's per-link NeuronLink bandwidth that calibration ran on (384 GiB/s over 4 links); other
// instances scale the ring bandwidth by their link bandwidth over this.
inline constexpr double kTrn1LinkBytesPerS = 96.0 * (1 << 30);
// Calibration, inter-node latency: nccom-test's 8-byte all-reduce over 64 ranks on 2
// trn1.32xlarge takes 520 us, of which the launch and the hops account for t_launch +
// 2·31·α_chip + 2·α_inter; the rest is taken as the fixed cost of a collective that leaves the
// node (the host's network proxy).
inline constexpr double kNccomSmallEfaSeconds = 520e-6;
inline constexpr double kEfaCollectiveFixedS =
    kNccomSmallEfaSeconds - kLaunchS - 2 * 31 * kAlphaChipToChipS - 2 * kAlphaInterNodeS;

// Where a collective runs: one rank's ring bandwidth within the node and its share of the node's
// EFA (all of the node's ranks cross EFA at once in a data-parallel reduction).
struct CollectivePath {
  double intra_bytes_per_s = kIntraRingBytesPerS;
  int ranks_per_chip = 2;      // a ring of more ranks crosses chips: each step takes α_chip
  double efa_bytes_per_s = 1;  // per rank
};
CollectivePath PathFor(const NodeModel& node);

// One collective of `bytes` (the full buffer) over `local` ranks on each of `nodes` nodes.
struct CollectiveCost {
  int64_t ns = 0;
  int64_t intra_ns = 0;   // the NeuronLink phases
  int64_t efa_ns = 0;     // the EFA phase, fixed cost included
  double efa_bytes = 0;   // bytes one rank sends over EFA (and receives)
  double ring_bytes = 0;  // bytes one rank sends within the node
};
CollectiveCost CostCollective(CollKind kind, double bytes, uint64_t local, uint64_t nodes,
                              const CollectivePath& path);

// The nodes a collective op spans: its `nodes`, or for `remote_ranks` (peers elsewhere, no node
// count given) enough nodes of `local` ranks to hold them.
uint64_t NodesOf(const Op& op, uint64_t local);

}  // namespace neuron::nrt
