// Pipelines across nodes (driver-sim/README.md#training-model): where each rank sits, which
// point-to-point exchanges leave the node, the groups the op lists name for them, and the 1F1B
// bubble `neuron-sim predict` adds.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "driver-sim/model/parallel.h"
#include "driver-sim/model/predict.h"

namespace neuron::workloads {
namespace {

TrainSpec Spec(const char* model, int tp, int pp, int nodes, int cores = 32) {
  TrainSpec s;
  s.model = *FindModel(model);
  s.seq = 4096;
  s.tp = tp;
  s.pp = pp;
  s.nodes = nodes;
  s.cores_per_node = cores;
  return s;
}

// The op named `name` in an op list, or null.
nlohmann::json OpNamed(const std::string& list, const std::string& name) {
  const nlohmann::json parsed = nlohmann::json::parse(list);
  for (const nlohmann::json& op : parsed["ops"]) {
    if (op["name"] == name) return op;
  }
  return nullptr;
}

TEST(Pipeline, RanksFillTpThenStagesThenReplicasAcrossNodes) {
  const TrainSpec s = Spec("llama2-13b", 8, 8, 32);
  const RankPlace first = PlaceRank(s, 0);
  EXPECT_EQ(first.node, 0);
  EXPECT_EQ(first.stage, 0);
  const RankPlace r31 = PlaceRank(s, 31);  // node 0 holds stages 0-3 of replica 0
  EXPECT_EQ(r31.node, 0);
  EXPECT_EQ(r31.stage, 3);
  EXPECT_EQ(r31.tp_rank, 7);
  const RankPlace r32 = PlaceRank(s, 32);  // stages 4-7 on node 1
  EXPECT_EQ(r32.node, 1);
  EXPECT_EQ(r32.stage, 4);
  EXPECT_EQ(r32.dp, 0);
  const RankPlace r64 = PlaceRank(s, 64);  // replica 1 starts on node 2
  EXPECT_EQ(r64.node, 2);
  EXPECT_EQ(r64.dp, 1);
  EXPECT_EQ(r64.stage, 0);
  // A replica narrower than a node: two replicas per node.
  const RankPlace narrow = PlaceRank(Spec("llama2-13b", 8, 2, 1), 16);
  EXPECT_EQ(narrow.node, 0);
  EXPECT_EQ(narrow.dp, 1);
  EXPECT_EQ(narrow.stage, 0);
}

TEST(Pipeline, OnlyTheStageBoundaryAtANodeEdgeCrossesEfa) {
  const TrainSpec wide = Spec("llama2-13b", 8, 8, 32);
  for (int stage = 0; stage + 1 < wide.pp; ++stage) {
    EXPECT_EQ(StageBoundaryCrossesNodes(wide, stage), stage == 3) << stage;
  }
  const TrainSpec narrow = Spec("llama2-13b", 8, 4, 1);
  for (int stage = 0; stage + 1 < narrow.pp; ++stage) {
    EXPECT_FALSE(StageBoundaryCrossesNodes(narrow, stage)) << stage;
  }
  EXPECT_TRUE(StageBoundaryCrossesNodes(Spec("llama2-7b", 32, 2, 2), 0));
}

// One process runs one node: stage 3's neighbour 4 is modelled over EFA (its own rank, "nodes"
// 2), stage 2 is a real rank on the node (pairs, no "nodes").
TEST(Pipeline, ASingleProcessModelsTheNeighbourOnAnotherNode) {
  const TrainSpec s = Spec("llama2-13b", 8, 8, 32);
  const StepOps ops = BuildStepOps(s, 3);
  const nlohmann::json send = OpNamed(ops.micro_step, "pp_send_activations");
  ASSERT_FALSE(send.is_null());
  EXPECT_EQ(send["nodes"], 2);
  EXPECT_EQ(send["groups"][0], nlohmann::json({24}));
  EXPECT_EQ(send["bytes"], 2.0 * 4096 * 5120 * 2);  // both ranks' [seq, hidden] in BF16
  const nlohmann::json recv = OpNamed(ops.micro_step, "pp_recv_activations");
  ASSERT_FALSE(recv.is_null());
  EXPECT_FALSE(recv.contains("nodes"));
  EXPECT_EQ(recv["groups"][0], nlohmann::json({16, 24}));
  // Stage 4 is numbered on its own node (node 1): its ranks are 0-7 there.
  const nlohmann::json back = OpNamed(BuildStepOps(s, 4).micro_step, "pp_send_gradients");
  ASSERT_FALSE(back.is_null());
  EXPECT_EQ(back["nodes"], 2);
  EXPECT_EQ(back["groups"][0], nlohmann::json::array({0}));
  // The ends have one neighbour each.
  EXPECT_TRUE(OpNamed(BuildStepOps(s, 0).micro_step, "pp_recv_activations").is_null());
  EXPECT_TRUE(OpNamed(BuildStepOps(s, 7).micro_step, "pp_send_activations").is_null());
  // Replicas are all on other nodes: each rank's DP group is itself, with 16 replicas modelled.
  const nlohmann::json dp = OpNamed(ops.optimizer, "dp_gradient_reduction");
  ASSERT_FALSE(dp.is_null());
  EXPECT_EQ(dp["groups"][0], nlohmann::json::array({0}));
  EXPECT_EQ(dp["nodes"], 16);
}

// Every node its own process: the pairs are world ranks and the peer across the node edge is real.
TEST(Pipeline, ANodeOfAMultiProcessJobPairsWorldRanks) {
  TrainSpec s = Spec("llama2-13b", 8, 8, 2);
  s.node_rank = 0;
  const nlohmann::json send = OpNamed(BuildStepOps(s, 3).micro_step, "pp_send_activations");
  ASSERT_FALSE(send.is_null());
  EXPECT_FALSE(send.contains("nodes"));
  EXPECT_EQ(send["groups"][0], nlohmann::json({24, 32}));
}

TEST(Pipeline, ValidateAdmitsStagesAcrossNodesAndNamesWhatDoesNotFit) {
  EXPECT_TRUE(Validate(Spec("llama2-13b", 8, 8, 32)).ok());
  EXPECT_TRUE(Validate(Spec("llama2-13b", 8, 4, 1)).ok());
  const absl::Status odd = Validate(Spec("llama2-7b", 8, 16, 4, 24));
  EXPECT_NE(std::string(odd.message())
                .find("TP 8 x PP 16 = 128 ranks per replica must divide "
                      "the 24 cores of a node or be a multiple"),
            std::string::npos)
      << odd;
  const absl::Status small = Validate(Spec("llama2-13b", 8, 8, 1));
  EXPECT_NE(std::string(small.message()).find("must divide the job's 32 ranks"), std::string::npos)
      << small;
  const absl::Status tp = Validate(Spec("llama2-7b", 16, 1, 1, 8));
  EXPECT_NE(std::string(tp.message()).find("--tp 16 must divide the 8 cores"), std::string::npos)
      << tp;
}

// The 32-node Llama-2-13B job: answered, its bubble (PP - 1) micro-steps, its EFA time
// the data-parallel reduction and the exchanges at the node edges.
TEST(Pipeline, PredictAnswersA32NodeTp8Pp8JobWithItsBubble) {
  PredictRequest r;
  r.train = Spec("llama2-13b", 8, 8, 32);
  r.train.zero1 = true;
  r.global_batch = 1024;
  absl::StatusOr<Prediction> p = Predict(r);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->dp, 16);
  EXPECT_EQ(p->micro_steps, 64);
  EXPECT_DOUBLE_EQ(p->breakdown.bubble, 7 * p->micro_step_seconds);
  EXPECT_GT(p->breakdown.collectives_efa, 0);
  r.train.pp = 1;
  r.train.tp = 8;
  r.global_batch = 128;
  absl::StatusOr<Prediction> flat = Predict(r);
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_EQ(flat->breakdown.bubble, 0);
}

// Two stages of a replica split over two nodes with no data parallelism: the only EFA traffic is
// the exchange between them, absent when both stages share a node.
TEST(Pipeline, TheExchangeCrossesEfaOnlyWhenTheStagesAreOnTwoNodes) {
  PredictRequest across;
  across.train = Spec("llama2-7b", 32, 2, 2);
  across.global_batch = 4;
  absl::StatusOr<Prediction> a = Predict(across);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->dp, 1);
  EXPECT_GT(a->breakdown.collectives_efa, 0);
  PredictRequest within;
  within.train = Spec("llama2-7b", 16, 2, 1);
  within.global_batch = 4;
  absl::StatusOr<Prediction> w = Predict(within);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->dp, 1);
  EXPECT_EQ(w->breakdown.collectives_efa, 0);
}

}  // namespace
}  // namespace neuron::workloads
