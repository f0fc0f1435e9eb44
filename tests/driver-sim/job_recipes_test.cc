// The pure parts of multi-node jobs: the recipes' pods, env and rank layout (driver-sim/cluster),
// the job-wide step lines, the workloads' placement from a launcher's environment, and the op
// lists' world-wide group numbering with a node rank (driver-sim/README.md#jobs).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "driver-sim/cluster/job.h"
#include "driver-sim/cluster/recipes.h"
#include "driver-sim/model/transformer.h"
#include "driver-sim/workloads/workload.h"

namespace neuron::sim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

std::vector<NodeSlot> Nodes(int n, const std::string& instance = "trn1.32xlarge") {
  std::vector<NodeSlot> v;
  for (int i = 1; i <= n; ++i) {
    v.push_back({"node-" + std::to_string(i), "127.0.1." + std::to_string(i), instance});
  }
  return v;
}

TEST(RecipeTest, RaytrainIsTwoWholeNodePodsWithTorchrunEnv) {
  absl::StatusOr<JobPlan> plan = PlanJob("llama2-7b-raytrain", {}, Nodes(3), 41000);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->name, "llama2-7b-raytrain");
  EXPECT_EQ(plan->nodes, 2);
  EXPECT_EQ(plan->world, 64);
  EXPECT_EQ(plan->comm_id, "127.0.1.1:41000");
  ASSERT_EQ(plan->pods.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const PodPlan& p = plan->pods[i];
    const std::string r = std::to_string(i);
    EXPECT_EQ(p.name, "llama2-7b-raytrain-worker-" + r);
    EXPECT_EQ(p.node, i);
    EXPECT_THAT(p.requests,
                ElementsAre(Pair("aws.amazon.com/neuron", 16), Pair("vpc.amazonaws.com/efa", 8)));
    EXPECT_EQ(p.first_rank, 32 * static_cast<int>(i));
    EXPECT_EQ(p.ranks, 32);
    const std::map<std::string, std::string> want = {
        {"GROUP_RANK", r},
        {"NODE_RANK", r},
        {"GROUP_WORLD_SIZE", "2"},
        {"WORLD_SIZE", "64"},
        {"LOCAL_WORLD_SIZE", "32"},
        {"RANK", std::to_string(32 * i)},
        {"LOCAL_RANK", "0"},
        {"MASTER_ADDR", "127.0.1.1"},
        {"MASTER_PORT", "41000"},
        {"NEURON_RT_ROOT_COMM_ID", "127.0.1.1:41000"},
        {"NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS", "3"},
        {"NEURON_RT_STOCHASTIC_ROUNDING_EN", "1"},
        {"NEURON_CC_FLAGS", "--model-type transformer --distribution-strategy=llm-training"}};
    EXPECT_EQ(p.env, want);
    EXPECT_THAT(p.run_args, ElementsAre("--workload", "llama2-7b", "--steps", "0", "--tp", "8"));
  }
}

TEST(RecipeTest, NemoIsFourMpiWorkersOneProcessPerNode) {
  JobOptions o;
  o.name = "nemo";
  o.steps = 2;
  o.micro_steps = 2;
  o.scale = 0.01;
  absl::StatusOr<JobPlan> plan = PlanJob("llama2-7b-nemo", o, Nodes(4), 41001);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->pods.size(), 4u);
  const PodPlan& p = plan->pods[3];
  EXPECT_EQ(p.name, "nemo-worker-3");
  EXPECT_EQ(p.env.at("OMPI_COMM_WORLD_RANK"), "3");
  EXPECT_EQ(p.env.at("OMPI_COMM_WORLD_SIZE"), "4");
  EXPECT_EQ(p.env.at("OMPI_COMM_WORLD_LOCAL_RANK"), "0");
  EXPECT_EQ(p.env.at("NEURON_RT_ROOT_COMM_ID"), "127.0.1.1:41001");
  EXPECT_FALSE(p.env.contains("GROUP_RANK"));
  EXPECT_EQ(p.first_rank, 96);
  EXPECT_THAT(p.run_args, ElementsAre("--workload", "llama2-7b", "--steps", "2", "--tp", "8",
                                      "--micro-steps", "2", "--scale", "0.01"));
}

// The job shape's flags (job_shape.h) reach every pod's run as given; a --tp replaces the recipe's.
TEST(RecipeTest, ShapeFlagsGoToEveryPodsRun) {
  JobOptions o;
  o.steps = 1;
  o.shape_args = {"--tp", "4", "--pp", "2", "--precision", "fp32"};
  absl::StatusOr<JobPlan> plan = PlanJob("llama2-7b-nemo", o, Nodes(4), 41003);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const PodPlan& p : plan->pods) {
    EXPECT_THAT(p.run_args, ElementsAre("--workload", "llama2-7b", "--steps", "1", "--tp", "4",
                                        "--pp", "2", "--precision", "fp32"));
  }
}

TEST(RecipeTest, BertTakesNodesAndMapsMicroStepsToAccum) {
  JobOptions o;
  o.nodes = 2;
  o.micro_steps = 4;
  absl::StatusOr<JobPlan> plan = PlanJob("bert-large-torchx", o, Nodes(2), 41002);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->pods.size(), 2u);
  EXPECT_EQ(plan->pods[1].name, "bert-large-torchx-role1-1");
  EXPECT_EQ(plan->pods[1].env.at("FI_PROVIDER"), "efa");
  EXPECT_EQ(plan->pods[1].env.at("WORLD_SIZE"), "64");
  EXPECT_THAT(plan->pods[1].run_args,
              ElementsAre("--workload", "bert-large", "--steps", "0", "--accum", "4"));
  EXPECT_EQ(PlanJob("bert-large-torchx", {}, Nodes(1), 41002)->pods.size(), 1u);
}

TEST(RecipeTest, BadRequestsNameWhatIsWrong) {
  JobOptions nodes;
  nodes.nodes = 3;
  EXPECT_THAT(std::string(PlanJob("llama2-7b-raytrain", nodes, Nodes(3), 1).status().message()),
              HasSubstr("no --nodes"));
  EXPECT_THAT(std::string(PlanJob("llama2-7b-nemo", {}, Nodes(2), 1).status().message()),
              HasSubstr("needs 4 nodes and the cluster has 2"));
  EXPECT_THAT(
      std::string(PlanJob("llama2-7b-raytrain", {}, Nodes(2, "inf2.xlarge"), 1).status().message()),
      HasSubstr("node node-1 is a inf2.xlarge"));
  EXPECT_THAT(std::string(PlanJob("gpt-9", {}, Nodes(2), 1).status().message()),
              HasSubstr("unknown recipe \"gpt-9\""));
  JobOptions name;
  name.name = "Bad_Name";
  EXPECT_THAT(std::string(PlanJob("llama2-7b-raytrain", name, Nodes(2), 1).status().message()),
              HasSubstr("--name \"Bad_Name\""));
}

TEST(StepTallyTest, SumsEveryPodsFiguresOnceAllReported) {
  const std::optional<StepFigures> a = ParseStepLine(
      "step 1/2  step_time 2.000 s  seq/s 4.0 (0.1 per core)  tokens/s 16384 (node 0 of 2)  "
      "micro-step 0.100 s");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->step, 1);
  EXPECT_DOUBLE_EQ(a->step_time, 2.0);
  EXPECT_DOUBLE_EQ(*a->tokens_per_s, 16384);
  EXPECT_FALSE(ParseStepLine("step 1: core 3 (nd1 nc1): results contain NaN").has_value());
  EXPECT_FALSE(ParseStepLine("llama2-7b: 32 cores here").has_value());
  StepFigures b = *a;
  b.step_time = 3;
  b.tokens_per_s = 10000;
  StepTally tally(2);
  EXPECT_FALSE(tally.Add(0, *a, 2).has_value());
  EXPECT_FALSE(tally.Add(0, *a, 2).has_value());  // a pod's second report of a step is ignored
  const std::optional<std::string> line = tally.Add(1, b, 2);
  ASSERT_TRUE(line.has_value());
  EXPECT_EQ(*line, "job step 1/2  slowest step_time 3.000 s  seq/s 8.0  tokens/s 26384  (2 pods)");
  // One pod without a figure makes the job's unknown, not smaller.
  StepFigures c = *a;
  c.tokens_per_s.reset();
  StepTally partial(2);
  partial.Add(0, *a, 0);
  EXPECT_THAT(*partial.Add(1, c, 0), ::testing::Not(HasSubstr("tokens/s")));
}

}  // namespace
}  // namespace neuron::sim

namespace neuron::workloads {
namespace {

using ::testing::HasSubstr;

EnvLookup Env(std::map<std::string, std::string> vars) {
  auto held = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [held](const char* name) -> const char* {
    const auto it = held->find(name);
    return it == held->end() ? nullptr : it->second.c_str();
  };
}

TEST(PlacementTest, FlagEnvOrNone) {
  WorkloadOptions o;
  EXPECT_FALSE(ResolvePlacement(o, Env({}))->has_value());
  absl::StatusOr<std::optional<NodePlacement>> torch = ResolvePlacement(
      o, Env({{"GROUP_RANK", "1"}, {"WORLD_SIZE", "64"}, {"LOCAL_WORLD_SIZE", "32"}}));
  ASSERT_TRUE(torch.ok() && torch->has_value());
  EXPECT_EQ((*torch)->node_rank, 1);
  EXPECT_EQ((*torch)->nodes, 2);
  EXPECT_EQ((*torch)->ranks_per_node, 32);
  absl::StatusOr<std::optional<NodePlacement>> mpi =
      ResolvePlacement(o, Env({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}}));
  ASSERT_TRUE(mpi.ok() && mpi->has_value());
  EXPECT_EQ((*mpi)->node_rank, 3);
  EXPECT_EQ((*mpi)->nodes, 4);
  EXPECT_EQ((*mpi)->source, "OMPI_COMM_WORLD_RANK");
  o.node_rank = 1;
  o.shape.nodes = 3;
  absl::StatusOr<std::optional<NodePlacement>> flag =
      ResolvePlacement(o, Env({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "4"}}));
  ASSERT_TRUE(flag.ok() && flag->has_value());
  EXPECT_EQ((*flag)->nodes, 3);  // the flag wins over the environment
}

TEST(PlacementTest, BadEnvironmentIsNamed) {
  WorkloadOptions o;
  auto message = [&](std::map<std::string, std::string> vars) {
    return std::string(ResolvePlacement(o, Env(std::move(vars))).status().message());
  };
  EXPECT_THAT(message({{"NODE_RANK", "1"}}), HasSubstr("WORLD_SIZE and LOCAL_WORLD_SIZE"));
  EXPECT_THAT(message({{"GROUP_RANK", "x"}}), HasSubstr("GROUP_RANK=\"x\""));
  EXPECT_THAT(message({{"GROUP_RANK", "0"}, {"WORLD_SIZE", "48"}, {"LOCAL_WORLD_SIZE", "32"}}),
              HasSubstr("not a multiple"));
  EXPECT_THAT(message({{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}}),
              HasSubstr("outside a job of 4 nodes"));
  o.shape.nodes = 3;
  EXPECT_THAT(message({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "4"}}),
              HasSubstr("--nodes 3 disagrees"));
}

using Groups = std::vector<std::vector<uint32_t>>;

// The collectives of one op list by name: their groups, and whether they carry "nodes".
std::map<std::string, std::pair<Groups, bool>> Collectives(const std::string& list) {
  std::map<std::string, std::pair<Groups, bool>> out;
  const nlohmann::json doc = nlohmann::json::parse(list);
  for (const nlohmann::json& op : doc.at("ops")) {
    if (!op.contains("groups")) continue;
    out[op.at("name").get<std::string>()] = {op.at("groups").get<Groups>(), op.contains("nodes")};
  }
  return out;
}

TEST(GlobalGroupsTest, NodeRankNumbersTheWholeWorldAndModelsNoPeers) {
  TrainSpec s;
  s.model = *FindModel("llama2-7b");
  s.seq = 256;
  s.tp = 8;
  s.cores_per_node = 32;
  s.nodes = 2;
  s.zero1 = true;
  s.scale = 0.01;
  s.node_rank = 1;
  ASSERT_TRUE(Validate(s).ok());
  const StepOps ops = BuildStepOps(s, 0);
  const auto opt = Collectives(ops.optimizer);
  ASSERT_TRUE(opt.contains("dp_gradient_reduction") && opt.contains("zero1_param_allgather"));
  const auto& [dp, dp_nodes] = opt.at("dp_gradient_reduction");
  EXPECT_FALSE(dp_nodes);  // the peers are real processes
  ASSERT_EQ(dp.size(), 8u);
  // DP group of TP rank 3: rank 3 + 8k on both nodes.
  EXPECT_EQ(dp[3], (std::vector<uint32_t>{3, 11, 19, 27, 35, 43, 51, 59}));
  const auto micro = Collectives(ops.micro_step);
  ASSERT_TRUE(micro.contains("tp_allreduce_attn"));
  const auto& [tp, tp_nodes] = micro.at("tp_allreduce_attn");
  EXPECT_FALSE(tp_nodes);
  ASSERT_EQ(tp.size(), 8u);
  EXPECT_EQ(tp[4], (std::vector<uint32_t>{32, 33, 34, 35, 36, 37, 38, 39}));  // node 1's first
  EXPECT_FALSE(opt.at("zero1_param_allgather").second);

  // Without a node rank: the node's own 32 ranks and the other node modelled.
  s.node_rank = -1;
  const auto modelled = Collectives(BuildStepOps(s, 0).optimizer);
  EXPECT_TRUE(modelled.at("dp_gradient_reduction").second);
  EXPECT_EQ(modelled.at("dp_gradient_reduction").first[3], (std::vector<uint32_t>{3, 11, 19, 27}));
  s.node_rank = 2;
  EXPECT_THAT(std::string(Validate(s).message()), HasSubstr("node rank 2 is outside"));
}

}  // namespace
}  // namespace neuron::workloads
