#pragma once
// A transformer training step built from the model's architecture
// (driver-sim/README.md#training-model): every matmul, attention, softmax, normalisation,
// activation, embedding and loss of the forward and backward pass, the tensor-parallel
// all-reduces per layer, gradient accumulation, the data-parallel gradient reduction
// (hierarchical: NeuronLink, then EFA) and the optimizer's memory-bound update, as op lists for
// libnrt-sim (docs/runtime.md#neff-header). `neuron-sim run` loads these lists and `neuron-sim
// predict` costs the very same lists with the runtime's engine and collective models. No time
// constant enters: durations come only from those models.
// Thread-safe (pure functions).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace neuron::workloads {

struct ModelShape {
  std::string name;
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;  // grouped-query attention; = heads for multi-head attention
  int ffn = 0;
  int vocab = 0;
  bool gated_mlp = false;  // SwiGLU (three FFN matrices) instead of GELU (two)
  bool causal = true;      // decoder; false: encoder (BERT)
  bool rms_norm = true;    // RMSNorm; false: LayerNorm
  bool dropout = false;    // dropout masks (BERT)
  bool tied_head = false;  // the output projection reuses the embedding (BERT's MLM decoder)
};

// The decoders and encoders AWS's trn1 training figures name (llama2-7b, gpt3-175b, vit-base, ...;
// driver-sim/model/published/models.csv); NotFound lists them.
absl::StatusOr<ModelShape> FindModel(std::string_view name);
std::vector<std::string_view> ModelNames();
// Parameters of the model (embeddings included).
double ParamCount(const ModelShape& m);
// FLOPs per token of a training step as docs/hardware.md#calibration-points counts them:
// 6N + 12·L·s·d.
double FlopsPerToken(const ModelShape& m, int seq);

enum class Precision { kBf16, kFp32 };  // kBf16: BF16 compute with FP32 master weights
enum class Optimizer { kAdamW, kLamb };

// What the backward recomputes rather than keep from the forward (NxD's
// activation_checkpoint_config, NeMo's and Megatron's activations_checkpoint_granularity;
// docs/hardware.md#recompute): kNone keeps every activation; kSelective recomputes the attention
// core (scores, softmax, dropout) from Q, K and V; kSelectiveMlp the MLP block too (NxD's
// recipes at sequence 8,192); kFull reruns each layer's forward, its TP collectives included,
// before that layer's backward.
enum class Checkpointing { kNone, kSelective, kSelectiveMlp, kFull };
// How attention lays out its [s, s] scores (docs/hardware.md#attention-layout). kFlash: tiled in
// SBUF with an online softmax, tiles wholly above a causal diagonal skipped, and the backward
// recomputes each tile whatever the checkpointing. kPlain: scores, probabilities and dropout
// mask are whole HBM tensors (an unfused framework attention, as HF's BertSelfAttention), the
// causal mask applied to the full [s, s].
enum class Attention { kFlash, kPlain };

struct TrainSpec {
  ModelShape model;
  int seq = 0;
  int micro_batch = 1;
  int tp = 1;
  int pp = 1;
  int cores_per_node = 0;  // ranks this node runs (one per logical core)
  int nodes = 1;
  // -1: one process runs this node's ranks and the other nodes' peers are modelled (the op
  // lists' "nodes"). >= 0: this process is node `node_rank` of a job whose every node runs its
  // own process; collective groups are numbered over the whole world's ranks and the peers are
  // real (docs/runtime.md#collectives).
  int node_rank = -1;
  Precision precision = Precision::kBf16;
  Optimizer optimizer = Optimizer::kAdamW;
  bool zero1 = false;
  // Sequence parallelism with TP (Megatron's, NxD's sequence_parallel_enabled): the layer norms,
  // dropout and residual adds work on the rank's s/TP tokens, and each TP all-reduce is a
  // reduce-scatter and, before the next TP region, an all-gather
  // (docs/hardware.md#sequence-parallel).
  bool sequence_parallel = false;
  Checkpointing checkpointing = Checkpointing::kSelective;
  Attention attention = Attention::kFlash;
  double scale = 1.0;  // multiplies every op's work (tests run small jobs)

  int dp() const { return cores_per_node * nodes / (tp * pp); }
  // Whole replicas on one node; 0 when a replica's stages span nodes.
  int dp_local() const { return cores_per_node / (tp * pp); }
  bool multi_process() const { return node_rank >= 0; }
  // Ranks the op lists number: the node's own, or with node_rank the whole world's.
  int world() const { return multi_process() ? cores_per_node * nodes : cores_per_node; }
  // The world rank of this node's first core.
  int rank_base() const { return multi_process() ? node_rank * cores_per_node : 0; }
};

// InvalidArgument when the spec cannot run: TP must divide heads, kv-heads and the node's cores,
// PP the layers, TP x PP the node's cores or be a multiple of them (stages across nodes,
// parallel.h), and so on; the message names the flag.
absl::Status Validate(const TrainSpec& s);

// The two op lists of one rank (JSON, op-list version 1) for pipeline stage `stage`: one
// micro-step (the activations received from the previous stage, forward, sent to the next;
// the gradients received back, backward, sent back; gradient accumulation) and the optimizer
// phase (gradient reduction, optimizer update, ZeRO-1 parameter all-gather). Collective groups are
// numbered as parallel.h says: over the whole world with node_rank >= 0 (the peers are real
// processes), else over the ranks of the node that holds `stage`, the collectives carrying
// "nodes" for the modelled peers (data-parallel replicas and pipeline neighbours elsewhere).
struct StepOps {
  std::string micro_step;
  std::string optimizer;
};
StepOps BuildStepOps(const TrainSpec& s, int stage);

}  // namespace neuron::workloads
