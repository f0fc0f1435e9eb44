#include "driver-sim/runtime/timing.h"

#include <algorithm>
#include <cmath>

namespace neuron::nrt {
namespace {

// Ring steps and the fraction of the buffer one rank sends, for a ring of n.
double Steps(CollKind kind, double n) { return (kind == CollKind::kAllReduce ? 2 : 1) * (n - 1); }
double Fraction(CollKind kind, double n) { return Steps(kind, n) / n; }

}  // namespace

CollectivePath PathFor(const NodeModel& node) {
  CollectivePath p;
  if (node.LinkBytesPerS() > 0) {
    p.intra_bytes_per_s = kIntraRingBytesPerS * node.LinkBytesPerS() / kTrn1LinkBytesPerS;
  }
  p.efa_bytes_per_s = node.EfaShareBytesPerS();
  p.ranks_per_chip = std::max(node.cores_per_device(), 1);
  return p;
}

uint64_t NodesOf(const Op& op, uint64_t local) {
  if (op.remote_ranks == 0) return std::max<uint64_t>(op.nodes, 1);
  return 1 + (op.remote_ranks + std::max<uint64_t>(local, 1) - 1) / std::max<uint64_t>(local, 1);
}

CollectiveCost CostCollective(CollKind kind, double bytes, uint64_t local, uint64_t nodes,
                              const CollectivePath& path) {
  CollectiveCost c;
  const double n = static_cast<double>(std::max<uint64_t>(local, 1));
  const double m = static_cast<double>(std::max<uint64_t>(nodes, 1));
  if (n * m <= 1) return c;
  // Within the node: one ring (all-reduce) or, with other nodes, a reduce-scatter before and an
  // all-gather after the EFA phase; either way the same steps and bytes as a ring all-reduce
  // over n for an all-reduce, half of it for the others.
  double intra = 0;
  if (n > 1) {
    c.ring_bytes = Fraction(kind, n) * bytes;
    // A ring steps in lockstep, so its slowest hop sets every step: chip to chip once the group
    // spans more than one chip.
    const double alpha = n > path.ranks_per_chip ? kAlphaChipToChipS : kAlphaIntraNodeS;
    intra = Steps(kind, n) * alpha + c.ring_bytes / path.intra_bytes_per_s;
  }
  double efa = 0;
  if (m > 1) {
    // Between nodes each rank handles its 1/n shard, in a ring over the m nodes.
    c.efa_bytes = Fraction(kind, m) * bytes / n;
    efa = kEfaCollectiveFixedS + Steps(kind, m) * kAlphaInterNodeS +
          c.efa_bytes / path.efa_bytes_per_s;
  }
  c.intra_ns = SecondsToNs(intra);
  c.efa_ns = SecondsToNs(efa);
  c.ns = c.intra_ns + c.efa_ns;
  return c;
}

}  // namespace neuron::nrt
