// Each mechanism of the device model (docs/hardware.md#engine-model,
// docs/hardware.md#collective-calibration) in isolation: what it adds, on which ops, and that the
// op lists `neuron-sim run` and `predict` share carry it.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "core/model/catalog.h"
#include "driver-sim/model/transformer.h"
#include "driver-sim/runtime/engine_model.h"
#include "driver-sim/runtime/program.h"
#include "driver-sim/runtime/timing.h"

namespace neuron {
namespace {

nrt::CoreEngines Trn1Engines() {
  nrt::CorePerf perf;
  perf.mem_bw = 410e9;
  perf.p_vector = 2.3e12;
  perf.p_scalar = 1.0e12;
  return nrt::EnginesFor(Chip::kTrainium, 1, perf);
}

nrt::Op LaneOp(nrt::Engine engine, double elements) {
  nrt::Op op;
  op.engine = engine;
  op.elements = elements;
  return op;
}

// One VectorE instruction covers 128 partitions x 512 elements and pays ~100 cycles of static
// overhead: an op of k full tiles costs k x (512 + 100) cycles, a tiny op one overhead.
TEST(ModelMechanisms, LaneEnginesPayTheStaticOverheadPerInstruction) {
  const nrt::CoreEngines e = Trn1Engines();
  const double tile = 128.0 * 512;
  for (double tiles : {1.0, 8.0, 1000.0}) {
    const nrt::OpCost c = nrt::CostOp(LaneOp(nrt::Engine::kVector, tiles * tile), e);
    EXPECT_NEAR(static_cast<double>(c.compute_ns), tiles * 512 / 1.12, 1) << tiles;
    EXPECT_NEAR(static_cast<double>(c.fixed_ns), tiles * 100 / 1.12, 1) << tiles;
  }
  // Half a tile still issues one instruction; the overhead does not shrink with the work.
  const nrt::OpCost small = nrt::CostOp(LaneOp(nrt::Engine::kScalar, 64), e);
  EXPECT_NEAR(static_cast<double>(small.fixed_ns), 100 / 1.4, 1);
  EXPECT_EQ(small.bound, nrt::Bound::kLatency);
}

// Within an op the DMA overlaps the engine (double-buffered operands) and the first DMA's start
// is paid once; across ops nothing overlaps: a list costs the sum of its ops.
TEST(ModelMechanisms, DmaOverlapsItsOpButOpsDoNotOverlapEachOther) {
  const nrt::CoreEngines e = Trn1Engines();
  nrt::Op op = LaneOp(nrt::Engine::kVector, 128.0 * 512 * 100);
  const nrt::OpCost compute_only = nrt::CostOp(op, e);
  op.bytes = 1e6;  // 3.7 us of DMA at 16 x 17 B/ns, shorter than the 55 us of VectorE work
  const nrt::OpCost both = nrt::CostOp(op, e);
  EXPECT_EQ(both.dma_ns, 3676);
  EXPECT_EQ(both.ns, compute_only.ns + 1300);  // only the ~1.3 us DMA start shows
  op.bytes = 1e8;                              // now the DMA is the longer term
  const nrt::OpCost memory = nrt::CostOp(op, e);
  EXPECT_EQ(memory.bound, nrt::Bound::kMemory);
  EXPECT_EQ(memory.ns, memory.dma_ns + memory.fixed_ns);
  const nrt::Op ops[] = {op, op, op};
  EXPECT_EQ(nrt::CostOps(ops, e).ns, 3 * memory.ns);
}

// `model` at `seq` on one trn1 node, TP 8; the caller sets the rest.
workloads::TrainSpec Spec(std::string_view model, int seq) {
  absl::StatusOr<workloads::ModelShape> m = workloads::FindModel(model);
  EXPECT_TRUE(m.ok()) << m.status();
  workloads::TrainSpec s;
  if (m.ok()) s.model = *m;
  s.seq = seq;
  s.cores_per_node = 32;
  s.tp = 8;
  return s;
}

absl::StatusOr<nrt::Program> MicroStepOf(const workloads::TrainSpec& s, bool optimizer = false) {
  if (absl::Status v = workloads::Validate(s); !v.ok()) return v;
  const workloads::StepOps ops = workloads::BuildStepOps(s, 0);
  return nrt::ParseOpList(optimizer ? ops.optimizer : ops.micro_step);
}

absl::StatusOr<nrt::Program> MicroStep(std::string_view model, int seq, workloads::Precision p,
                                       bool optimizer, bool sequence_parallel = false) {
  workloads::TrainSpec s = Spec(model, seq);
  s.precision = p;
  s.sequence_parallel = sequence_parallel;
  return MicroStepOf(s, optimizer);
}

int Count(const nrt::Program& p, std::string_view name) {
  int n = 0;
  for (const nrt::Op& op : p.ops) n += op.name == name ? 1 : 0;
  return n;
}

const nrt::Op* First(const nrt::Program& p, std::string_view name) {
  for (const nrt::Op& op : p.ops) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

// Sequence parallelism (docs/hardware.md#sequence-parallel), Llama-2-7B at TP 8: each of a layer's
// four TP all-reduces becomes a reduce-scatter and an all-gather of the same [t, d] buffer, the
// norms and residual adds work on t/8 tokens, and the matmuls and attention do not change.
TEST(ModelMechanisms, SequenceParallelismSplitsTheTokenWiseOpsAndEachAllReduce) {
  using workloads::Precision;
  absl::StatusOr<nrt::Program> off = MicroStep("llama2-7b", 4096, Precision::kBf16, false);
  absl::StatusOr<nrt::Program> on = MicroStep("llama2-7b", 4096, Precision::kBf16, false, true);
  ASSERT_TRUE(off.ok() && on.ok());
  for (const char* region : {"attn", "mlp", "mlp_grad", "attn_grad"}) {
    SCOPED_TRACE(region);
    const std::string name(region);
    EXPECT_EQ(Count(*off, "tp_allreduce_" + name), 32);
    EXPECT_EQ(Count(*on, "tp_allreduce_" + name), 0);
    EXPECT_EQ(Count(*on, "tp_reducescatter_" + name), 32);
    EXPECT_EQ(Count(*on, "tp_allgather_" + name), 32);
    const nrt::Op* all_reduce = First(*off, "tp_allreduce_" + name);
    ASSERT_NE(all_reduce, nullptr);
    EXPECT_EQ(First(*on, "tp_reducescatter_" + name)->bytes, all_reduce->bytes);
    EXPECT_EQ(First(*on, "tp_reducescatter_" + name)->coll, nrt::CollKind::kReduceScatter);
    EXPECT_EQ(First(*on, "tp_allgather_" + name)->bytes, all_reduce->bytes);
  }
  for (const char* token_wise : {"attn_norm", "residual_add", "mlp_norm_grad", "residual_grad"}) {
    EXPECT_DOUBLE_EQ(First(*on, token_wise)->elements * 8, First(*off, token_wise)->elements)
        << token_wise;
    EXPECT_DOUBLE_EQ(First(*on, token_wise)->bytes * 8, First(*off, token_wise)->bytes)
        << token_wise;
  }
  for (const char* same : {"qkv_proj", "attn_scores", "mlp_up", "softmax_exp"}) {
    EXPECT_DOUBLE_EQ(First(*on, same)->m, First(*off, same)->m) << same;
    EXPECT_DOUBLE_EQ(First(*on, same)->elements, First(*off, same)->elements) << same;
  }
  // The sequence is what TP splits: it must divide.
  EXPECT_FALSE(MicroStep("llama2-7b", 4100, Precision::kBf16, false, true).ok());
}

// The plain attention layout (docs/hardware.md#attention-layout), GPT-3 6.7B at seq 2048 and TP 8
// (4 heads a rank): the whole [s, s] is computed and masked, and every [s, s] tensor crosses HBM
// where flash attention keeps it in SBUF.
TEST(ModelMechanisms, PlainAttentionComputesTheWholeSquareAndKeepsItInHbm) {
  using workloads::Attention;
  workloads::TrainSpec s = Spec("gpt3-6.7b", 2048);
  absl::StatusOr<nrt::Program> flash = MicroStepOf(s);
  s.attention = Attention::kPlain;
  absl::StatusOr<nrt::Program> plain = MicroStepOf(s);
  ASSERT_TRUE(flash.ok() && plain.ok());
  const double square = 4.0 * 2048 * 2048;  // one [s, s] tensor of the rank's heads
  const double bf16 = 2;
  // Flash skips the 16 x 15 / 2 tiles above the diagonal of the 16 x 16; plain computes all.
  EXPECT_DOUBLE_EQ(First(*flash, "attn_scores")->batch, 4.0 * 17 / 32);
  EXPECT_DOUBLE_EQ(First(*plain, "attn_scores")->batch, 4.0);
  EXPECT_DOUBLE_EQ(First(*plain, "attn_scores")->bytes - First(*flash, "attn_scores")->bytes,
                   square * bf16);                                           // the scores written
  EXPECT_DOUBLE_EQ(First(*plain, "softmax_exp")->bytes, 2 * square * bf16);  // read, written
  EXPECT_DOUBLE_EQ(First(*plain, "softmax_grad")->bytes, 3 * square * bf16);
  EXPECT_DOUBLE_EQ(First(*flash, "softmax_grad")->bytes, 0);
  // Scale and mask are operations of their own only in the plain layout.
  EXPECT_EQ(Count(*plain, "attn_mask"), 32 * 2);  // forward, and the selective recomputation
  EXPECT_EQ(Count(*flash, "attn_mask"), 0);
  const nrt::CoreEngines e = Trn1Engines();
  EXPECT_GT(nrt::CostOps(plain->ops, e).ns, nrt::CostOps(flash->ops, e).ns);
  // BERT's dropout keeps a one-byte mask per probability.
  workloads::TrainSpec bert = Spec("bert-large", 512);
  bert.tp = 1;
  bert.attention = Attention::kPlain;
  absl::StatusOr<nrt::Program> b = MicroStepOf(bert);
  ASSERT_TRUE(b.ok());
  EXPECT_DOUBLE_EQ(First(*b, "attn_dropout_mask")->bytes, 16.0 * 512 * 512);
}

// Checkpointing (docs/hardware.md#recompute) decides what the backward runs again: full reruns
// each layer's forward, TP collectives included; selective+MLP reruns the MLP block; the plain
// layout's probabilities are recomputed under selective checkpointing only, while flash attention
// recomputes its tiles whatever the checkpointing.
TEST(ModelMechanisms, CheckpointingDecidesWhatTheBackwardRunsAgain) {
  using workloads::Attention;
  using workloads::Checkpointing;
  struct Case {
    Checkpointing c;
    Attention a;
    int qkv, mlp_up, allreduce_attn, scores_recompute;
  };
  const Case cases[] = {
      {Checkpointing::kNone, Attention::kFlash, 32, 32, 32, 32},
      {Checkpointing::kSelective, Attention::kFlash, 32, 32, 32, 32},
      {Checkpointing::kSelectiveMlp, Attention::kFlash, 32, 64, 32, 32},
      {Checkpointing::kFull, Attention::kFlash, 64, 64, 64, 32},
      {Checkpointing::kNone, Attention::kPlain, 32, 32, 32, 0},
      {Checkpointing::kSelective, Attention::kPlain, 32, 32, 32, 32},
      {Checkpointing::kFull, Attention::kPlain, 64, 64, 64, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << static_cast<int>(c.c) << " " << static_cast<int>(c.a));
    workloads::TrainSpec s = Spec("llama2-7b", 4096);
    s.checkpointing = c.c;
    s.attention = c.a;
    absl::StatusOr<nrt::Program> p = MicroStepOf(s);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(Count(*p, "qkv_proj"), c.qkv);
    EXPECT_EQ(Count(*p, "mlp_up"), c.mlp_up);
    EXPECT_EQ(Count(*p, "tp_allreduce_attn"), c.allreduce_attn);
    EXPECT_EQ(Count(*p, "attn_scores_recompute"), c.scores_recompute);
  }
}

// Attention transposes its [s,s] probabilities on TensorE once forward and twice backward per
// layer; with a head size of 128 each transpose costs what the QKᵀ product costs, so at long
// sequences they are a large share of attention.
TEST(ModelMechanisms, AttentionTransposesCostAScoreProductEach) {
  absl::StatusOr<nrt::Program> p = MicroStep("llama2-7b", 4096, workloads::Precision::kBf16, false);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Count(*p, "attn_probs_transpose"), 32);
  EXPECT_EQ(Count(*p, "attn_probs_transpose_recompute"), 32);
  EXPECT_EQ(Count(*p, "attn_scores_grad_transpose"), 32);
  const nrt::CoreEngines e = Trn1Engines();
  const nrt::Op* transpose = nullptr;
  const nrt::Op* scores = nullptr;
  for (const nrt::Op& op : p->ops) {
    if (op.name == "attn_probs_transpose" && transpose == nullptr) transpose = &op;
    if (op.name == "attn_scores" && scores == nullptr) scores = &op;
  }
  ASSERT_NE(transpose, nullptr);
  ASSERT_NE(scores, nullptr);
  EXPECT_EQ(transpose->bytes, 0);  // SBUF to SBUF
  EXPECT_EQ(nrt::CostOp(*transpose, e).compute_ns, nrt::CostOp(*scores, e).compute_ns);
}

// The BF16 weights are written with stochastic rounding (a random word per parameter and an
// add); FP32 training writes no BF16 copy and rounds nothing.
TEST(ModelMechanisms, StochasticRoundingOnlyWhereABf16CopyIsWritten) {
  absl::StatusOr<nrt::Program> bf16 =
      MicroStep("bert-large", 128, workloads::Precision::kBf16, true);
  absl::StatusOr<nrt::Program> fp32 =
      MicroStep("bert-large", 128, workloads::Precision::kFp32, true);
  ASSERT_TRUE(bf16.ok() && fp32.ok());
  EXPECT_EQ(Count(*bf16, "stochastic_rounding_random"), 1);
  EXPECT_EQ(Count(*bf16, "stochastic_rounding_add"), 1);
  EXPECT_EQ(Count(*fp32, "stochastic_rounding_random"), 0);
}

// The collective calibrations are net of the launch every nccom-test figure contains: each
// reproduces its figure as launch + hops + bytes (+ the EFA fixed cost).
TEST(ModelMechanisms, NccomCalibrationsIncludeTheLaunch) {
  EXPECT_NEAR(nrt::kLaunchS + 2 * nrt::kAlphaIntraNodeS + 1073741824.0 / nrt::kIntraRingBytesPerS,
              18930e-6, 1e-12);
  EXPECT_NEAR(
      nrt::kLaunchS + 31 * nrt::kAlphaChipToChipS + 1024.0 * 31 / 32 / nrt::kIntraRingBytesPerS,
      151e-6, 1e-12);
  EXPECT_NEAR(nrt::kLaunchS + 62 * nrt::kAlphaChipToChipS + 2 * nrt::kAlphaInterNodeS +
                  nrt::kEfaCollectiveFixedS,
              520e-6, 1e-12);
}

// A ring within one chip steps at α_intra; one that spans chips at the slower α_chip, every step.
TEST(ModelMechanisms, RingsThatCrossChipsStepAtTheChipToChipLatency) {
  nrt::CollectivePath path;
  path.ranks_per_chip = 2;
  const nrt::CollectiveCost two = nrt::CostCollective(nrt::CollKind::kAllGather, 0, 2, 1, path);
  const nrt::CollectiveCost four = nrt::CostCollective(nrt::CollKind::kAllGather, 0, 4, 1, path);
  EXPECT_NEAR(static_cast<double>(two.ns), 1 * nrt::kAlphaIntraNodeS * 1e9, 1);
  EXPECT_NEAR(static_cast<double>(four.ns), 3 * nrt::kAlphaChipToChipS * 1e9, 1);
  EXPECT_GT(nrt::kAlphaChipToChipS, nrt::kAlphaIntraNodeS);
}

}  // namespace
}  // namespace neuron
