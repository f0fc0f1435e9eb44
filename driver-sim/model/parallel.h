#pragma once
// Where a training job's ranks sit and the replica groups its op lists name
// (driver-sim/README.md#training-model), in the order NeuronX Distributed and NeMo place them:
// tensor parallelism innermost and inside a node, then the pipeline stages (a replica's stages
// share a node, or span consecutive nodes), data parallelism outermost. A world rank is
//   rank = (dp · PP + stage) · TP + tp_rank,   its node rank / cores_per_node.
// Validate (transformer.h) admits only the shapes where this holds. Thread-safe (pure functions).

#include <cstdint>
#include <vector>

#include "driver-sim/model/transformer.h"

namespace neuron::workloads {

struct RankPlace {
  int node = 0;
  int dp = 0;  // replica
  int stage = 0;
  int tp_rank = 0;
};
// The place of world rank `rank` (0 <= rank < cores_per_node · nodes).
RankPlace PlaceRank(const TrainSpec& s, int rank);

// True when the activations stage `stage` sends stage `stage + 1` leave the node (EFA), false
// when both stages share it (NeuronLink). The same for every replica.
bool StageBoundaryCrossesNodes(const TrainSpec& s, int stage);

// The rank that the op lists of `stage` number first: 0 when the lists number the whole world
// (multi_process), else the first rank of the node that holds `stage` of replica 0, whose ranks
// the lists number from 0 (the node a single process runs is that node).
int ListRankBase(const TrainSpec& s, int stage);

using Groups = std::vector<std::vector<uint32_t>>;

// Replica groups over the ranks the lists number (TrainSpec::world): TP groups are consecutive
// ranks; DP groups the ranks with the same stage and TP rank (single ranks when a replica spans
// nodes and the process runs one node).
Groups TpGroups(const TrainSpec& s);
Groups DpGroups(const TrainSpec& s);
// The nodes a data-parallel collective models beyond the ranks the lists number: none when the
// peers are real processes, else the replicas that are not on this node.
int ModelledDpNodes(const TrainSpec& s);

// The point-to-point exchange between the ranks of `stage` and those of its neighbour
// `other` (stage ± 1), as stage `stage`'s lists name it: pairs of ranks with the same replica and
// TP rank when both are in the lists' numbering; when the neighbour is on a node the lists do
// not number, the stage's rank alone with `*nodes` = 2 (the neighbour modelled over EFA).
Groups BoundaryGroups(const TrainSpec& s, int stage, int other, int* nodes);

}  // namespace neuron::workloads
