#include "driver-sim/model/parallel.h"

#include <algorithm>

namespace neuron::workloads {

RankPlace PlaceRank(const TrainSpec& s, int rank) {
  RankPlace p;
  p.node = rank / s.cores_per_node;
  p.tp_rank = rank % s.tp;
  p.stage = (rank / s.tp) % s.pp;
  p.dp = rank / (s.tp * s.pp);
  return p;
}

bool StageBoundaryCrossesNodes(const TrainSpec& s, int stage) {
  // Replica 0's ranks of the two stages; every replica is placed alike (Validate: a replica fills
  // whole nodes or a whole number of replicas fills a node).
  return (stage * s.tp) / s.cores_per_node != ((stage + 1) * s.tp) / s.cores_per_node;
}

int ListRankBase(const TrainSpec& s, int stage) {
  if (s.multi_process()) return 0;
  return (stage * s.tp) / s.cores_per_node * s.cores_per_node;
}

Groups TpGroups(const TrainSpec& s) {
  // TP divides cores_per_node (Validate), so consecutive groups never straddle two nodes.
  Groups g(static_cast<size_t>(s.world() / s.tp));
  for (int r = 0; r < s.world(); ++r) {
    g[static_cast<size_t>(r / s.tp)].push_back(static_cast<uint32_t>(r));
  }
  return g;
}

Groups DpGroups(const TrainSpec& s) {
  // rank mod (TP · PP) is stage · TP + tp_rank; a replica wider than the numbered ranks leaves
  // each rank alone, its replicas all elsewhere.
  const int width = s.tp * s.pp;
  Groups g(static_cast<size_t>(std::min(width, s.world())));
  for (int r = 0; r < s.world(); ++r) {
    g[static_cast<size_t>(r % width)].push_back(static_cast<uint32_t>(r));
  }
  return g;
}

int ModelledDpNodes(const TrainSpec& s) {
  return s.multi_process() ? 1 : s.dp() / std::max(1, s.dp_local());
}

Groups BoundaryGroups(const TrainSpec& s, int stage, int other, int* nodes) {
  const int base = ListRankBase(s, stage);
  const int end = base + s.world();
  Groups g;
  *nodes = 1;
  for (int r = base; r < end; ++r) {
    if (PlaceRank(s, r).stage != stage) continue;
    const int peer = r + (other - stage) * s.tp;
    if (peer >= base && peer < end) {
      g.push_back({static_cast<uint32_t>(std::min(r, peer) - base),
                   static_cast<uint32_t>(std::max(r, peer) - base)});
    } else {
      g.push_back({static_cast<uint32_t>(r - base)});
      *nodes = 2;
    }
  }
  return g;
}

}  // namespace neuron::workloads
