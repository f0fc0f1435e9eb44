#include "driver-sim/model/transformer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "driver-sim/model/parallel.h"

namespace neuron::workloads {
namespace {

using json = nlohmann::json;

// Shapes from each model's published configuration (driver-sim/README.md#training-model,
// driver-sim/model/published/models.csv, which a test holds this table to). ViT-B/16 is an
// encoder over 197 tokens (196 patches of a 224x224 image and the class token) whose patch
// embedding is a lookup here, and whose "vocabulary" is its 1,000-class head.
const std::vector<ModelShape>& Models() {
  //                       name, layers, hidden, heads, kv, ffn, vocab,
  //                       gated_mlp, causal, rms_norm, dropout, tied_head
  static const std::vector<ModelShape> kModels = {
      {"llama2-7b", 32, 4096, 32, 32, 11008, 32000, true, true, true, false, false},
      {"llama2-13b", 40, 5120, 40, 40, 13824, 32000, true, true, true, false, false},
      {"llama2-70b", 80, 8192, 64, 8, 28672, 32000, true, true, true, false, false},
      {"llama3-8b", 32, 4096, 32, 8, 14336, 128256, true, true, true, false, false},
      {"llama3.1-8b", 32, 4096, 32, 8, 14336, 128256, true, true, true, false, false},
      {"llama3.1-70b", 80, 8192, 64, 8, 28672, 128256, true, true, true, false, false},
      {"gpt3-6.7b", 32, 4096, 32, 32, 16384, 50257, false, true, false, false, true},
      {"gpt3-23b", 28, 8192, 64, 64, 32768, 50257, false, true, false, false, true},
      {"gpt3-46b", 56, 8192, 64, 64, 32768, 50257, false, true, false, false, true},
      {"gpt3-175b", 96, 12288, 96, 96, 49152, 50257, false, true, false, false, true},
      {"bert-large", 24, 1024, 16, 16, 4096, 30522, false, false, false, true, true},
      {"vit-base", 12, 768, 12, 12, 3072, 1000, false, false, false, false, false},
  };
  return kModels;
}

double LayerParams(const ModelShape& m) {
  const double d = m.hidden;
  const double dh = d / m.heads;
  const double attn = d * (m.heads * dh + 2.0 * m.kv_heads * dh) + m.heads * dh * d;
  const double mlp = (m.gated_mlp ? 3.0 : 2.0) * d * m.ffn;
  return attn + mlp + 2 * d;
}

// Builds one op list; every op's work is multiplied by `scale`.
class OpList {
 public:
  OpList(double scale, std::string dtype) : scale_(scale), dtype_(std::move(dtype)) {}

  // [m,k] x [k,n], `batch` times; `bytes` < 0: each operand crosses HBM once.
  void Matmul(const char* name, double m, double k, double n, double batch = 1, double bytes = -1) {
    json op = {{"op", "matmul"},  {"name", name},           {"m", m}, {"k", k}, {"n", n},
               {"dtype", dtype_}, {"batch", batch * scale_}};
    if (bytes >= 0) op["bytes"] = bytes * scale_;
    ops_.push_back(std::move(op));
  }
  void Lane(const char* engine, const char* name, double elements, double bytes) {
    ops_.push_back({{"op", engine},
                    {"name", name},
                    {"elements", elements * scale_},
                    {"bytes", bytes * scale_}});
  }
  void Dma(const char* name, double bytes) {
    ops_.push_back({{"op", "dma"}, {"name", name}, {"bytes", bytes * scale_}});
  }
  void Collective(const char* kind, const char* name, double bytes,
                  const std::vector<std::vector<uint32_t>>& groups, int nodes) {
    json op = {{"op", kind}, {"name", name}, {"bytes", std::floor(bytes * scale_)}};
    op["groups"] = groups;
    if (nodes > 1) op["nodes"] = nodes;
    ops_.push_back(std::move(op));
  }
  std::string Dump(const json& memory) const {
    return json{{"version", 1}, {"memory", memory}, {"ops", ops_}}.dump();
  }

 private:
  double scale_;
  std::string dtype_;
  json ops_ = json::array();
};

// Per-rank dimensions of one layer.
struct Dims {
  double t;       // tokens in the micro-batch
  double s;       // sequence
  double b;       // micro-batch
  double d;       // hidden
  double dh;      // head size
  double heads;   // attention heads on this rank
  double kv;      // key/value heads on this rank
  double ffn;     // FFN width on this rank
  double w;       // activation bytes per element
  double causal;  // fraction of the score tiles computed (upper triangle skipped)
  bool plain;     // the [s, s] tensors live in HBM (Attention::kPlain)

  // HBM bytes of `tensors` [s, s] tensors of `products` heads at `bytes` per element, read or
  // written by an attention op in the plain layout; none with flash attention.
  double ScoreBytes(double products, double tensors, double bytes) const {
    return plain ? tensors * products * s * s * bytes : 0;
  }
};

Dims DimsOf(const TrainSpec& s) {
  const ModelShape& m = s.model;
  Dims d{};
  d.b = s.micro_batch;
  d.s = s.seq;
  d.t = d.b * d.s;
  d.d = m.hidden;
  d.dh = static_cast<double>(m.hidden) / m.heads;
  d.heads = static_cast<double>(m.heads) / s.tp;
  d.kv = std::max(1.0, static_cast<double>(m.kv_heads) / s.tp);
  d.ffn = static_cast<double>(m.ffn) / s.tp;
  d.w = s.precision == Precision::kBf16 ? 2 : 4;
  // Flash attention works in 128-row tiles and skips those wholly above the diagonal; the plain
  // layout computes the whole [s, s] and masks it.
  const double tiles = std::ceil(d.s / 128);
  d.causal = m.causal && s.attention == Attention::kFlash ? (tiles + 1) / (2 * tiles) : 1.0;
  d.plain = s.attention == Attention::kPlain;
  return d;
}

// Element counts below are element-passes through an engine; an instruction with two input
// tiles takes twice the cycles of one with one (docs/hardware.md#core-parameters), hence the
// factors of 2 on binary operations.
// Normalisation over t x d: RMSNorm 3 VectorE passes, LayerNorm 4 (the last of each, the
// weight multiply, binary); read once, written once.
void Norm(OpList& l, const ModelShape& m, const Dims& x, const char* name, double passes_mul) {
  l.Lane("vector", name, (m.rms_norm ? 4 : 5) * passes_mul * x.t * x.d, 2 * x.t * x.d * x.w);
}

// A linear layer's backward: the data gradient and the weight gradient.
void LinearBackward(OpList& l, const char* name, double t, double in, double out) {
  l.Matmul(name, t, out, in);
  l.Matmul(name, in, t, out);
}

// The [s,s] probabilities of `products` heads transposed on TensorE (a matmul against the
// identity, as NKI's fused attention does, docs/hardware.md#engine-model) so that the key
// dimension lies on the partitions for the next matmul: each 128x128 block is one instruction of
// 128 moving columns, i.e. the tiled cost of [s,128]x[128,s]. It stays in SBUF: no HBM bytes.
void ProbsTranspose(OpList& l, const Dims& x, const char* name, double products) {
  l.Matmul(name, x.s, 128, x.s, products, 0);
}

// QKᵀ and the softmax of one layer's attention, forward or (`recompute`) rerun by the backward.
// Flash attention reruns only QKᵀ and the exponent, from the row maxima and sums it kept; the
// plain layout reruns the whole softmax and the dropout and writes the probabilities to HBM again.
// In the plain layout QKᵀ writes the scores, the max and sum read them, the exponent reads them
// and writes the probabilities, and dropout writes its one-byte mask and the dropped
// probabilities.
void ScoresAndSoftmax(OpList& l, const ModelShape& m, const Dims& x, bool recompute) {
  const double scores = x.b * x.heads * x.causal;  // [s,dh]x[dh,s] products
  const double n = scores * x.s * x.s;
  const double qk_io = x.t * (x.heads + x.kv) * x.dh * x.w;
  const bool whole = !recompute || x.plain;
  l.Matmul(recompute ? "attn_scores_recompute" : "attn_scores", x.s, x.dh, x.s, scores,
           qk_io + x.ScoreBytes(scores, 1, x.w));
  if (x.plain && whole) {
    // An unfused attention scales the scores and adds the mask as operations of their own; flash
    // attention folds the scale into the exponent and skips masked tiles.
    l.Lane("scalar", "attn_scale", n, 0);
    l.Lane("vector", "attn_mask", 2 * n, 0);
  }
  if (whole) l.Lane("vector", "softmax_max_sum", 2 * n, x.ScoreBytes(scores, 1, x.w));
  l.Lane("scalar", recompute ? "softmax_exp_recompute" : "softmax_exp", n,
         x.ScoreBytes(scores, 2, x.w));
  if (m.dropout && whole) {
    l.Lane("gpsimd", "attn_dropout_mask", n, x.ScoreBytes(scores, 1, 1));
    l.Lane("vector", "attn_dropout", 2 * n, x.ScoreBytes(scores, 2, x.w));
  }
}

// A TP region's ends, [t, d] each (docs/hardware.md#sequence-parallel). Without sequence
// parallelism the region's partial output is all-reduced; with it, reduce-scattered to the rank's
// t/TP tokens, and the next region's input all-gathered from them. A collective's bytes are the
// whole buffer, as the runtime counts them. `what` names the region: "attn", "mlp_grad", ...
void TpRegionIn(OpList& l, const TrainSpec& s, const Dims& x, const Groups& tp, const char* what) {
  if (s.tp == 1 || !s.sequence_parallel) return;
  l.Collective("allgather", fmt::format("tp_allgather_{}", what).c_str(), x.t * x.d * x.w, tp, 1);
}
void TpRegionOut(OpList& l, const TrainSpec& s, const Dims& x, const Groups& tp, const char* what) {
  if (s.tp == 1) return;
  const char* kind = s.sequence_parallel ? "reducescatter" : "allreduce";
  l.Collective(kind, fmt::format("tp_{}_{}", kind, what).c_str(), x.t * x.d * x.w, tp, 1);
}

// What works per token outside the TP regions (norms, dropout, residuals): the rank's t/TP
// tokens with sequence parallelism, all t without.
Dims TokenWise(const TrainSpec& s, const Dims& x) {
  Dims out = x;
  if (s.sequence_parallel) out.t = x.t / s.tp;
  return out;
}

// The MLP block between its norm and its residual add, TP region ends included: what the forward
// runs, and what Checkpointing::kSelectiveMlp reruns before the block's backward.
void MlpForward(OpList& l, const TrainSpec& s, const Dims& x, const Groups& tp) {
  const ModelShape& m = s.model;
  TpRegionIn(l, s, x, tp, "mlp");
  const double up = (m.gated_mlp ? 2 : 1) * x.ffn;
  l.Matmul("mlp_up", x.t, x.d, up);
  l.Lane("scalar", m.gated_mlp ? "silu" : "gelu", x.t * x.ffn, 0);
  if (m.gated_mlp) l.Lane("vector", "gate_mul", 2 * x.t * x.ffn, 0);
  l.Dma("mlp_activation_io", (m.gated_mlp ? 3 : 2) * x.t * x.ffn * x.w);
  l.Matmul("mlp_down", x.t, x.ffn, x.d);
  TpRegionOut(l, s, x, tp, "mlp");
}

// Attention and MLP of one layer, forward. Flash attention keeps scores and probabilities in
// SBUF: only Q, K, V and the output cross HBM; the plain layout writes and reads them there.
void LayerForward(OpList& l, const TrainSpec& s, const Dims& x, const Groups& tp) {
  const ModelShape& m = s.model;
  const double qkv = (x.heads + 2 * x.kv) * x.dh;
  const double scores = x.b * x.heads * x.causal;  // [s,dh]x[dh,s] products
  const Dims y = TokenWise(s, x);
  Norm(l, m, y, "attn_norm", 1);
  TpRegionIn(l, s, x, tp, "attn");
  l.Matmul("qkv_proj", x.t, x.d, qkv);
  if (m.rms_norm) {  // rotary embedding on Q and K (Llama-style models)
    l.Lane("vector", "rotary", 2 * 3 * x.t * (x.heads + x.kv) * x.dh,
           2 * x.t * (x.heads + x.kv) * x.dh * x.w);
  }
  ScoresAndSoftmax(l, m, x, false);
  ProbsTranspose(l, x, "attn_probs_transpose", scores);
  l.Matmul("attn_values", x.s, x.s, x.dh, scores,
           x.t * (x.kv + x.heads) * x.dh * x.w + x.ScoreBytes(scores, 1, x.w));
  l.Matmul("out_proj", x.t, x.heads * x.dh, x.d);
  TpRegionOut(l, s, x, tp, "attn");
  if (m.dropout) l.Lane("gpsimd", "hidden_dropout_mask", 2 * y.t * y.d, 0);
  l.Lane("vector", "residual_add", 2 * y.t * y.d, 3 * y.t * y.d * y.w);
  Norm(l, m, y, "mlp_norm", 1);
  MlpForward(l, s, x, tp);
  l.Lane("vector", "residual_add", 2 * y.t * y.d, 3 * y.t * y.d * y.w);
}

// The same layer backward: two matmuls per forward matmul, the attention scores recomputed
// (fused attention keeps no probabilities), twice the element-wise passes. With sequence
// parallelism a region's reduce-scatter is an all-gather backward and its all-gather a
// reduce-scatter; the input a weight gradient needs is gathered again in NxD, overlapped with the
// data gradient, which this model (nothing overlaps across ops) leaves out rather than serialise.
void LayerBackward(OpList& l, const TrainSpec& s, const Dims& x, const Groups& tp) {
  const ModelShape& m = s.model;
  const double qkv = (x.heads + 2 * x.kv) * x.dh;
  const double scores = x.b * x.heads * x.causal;
  const double up = (m.gated_mlp ? 2 : 1) * x.ffn;
  const Dims y = TokenWise(s, x);
  l.Lane("vector", "residual_grad", 2 * y.t * y.d, 2 * y.t * y.d * y.w);
  if (s.checkpointing == Checkpointing::kSelectiveMlp) MlpForward(l, s, x, tp);
  TpRegionIn(l, s, x, tp, "mlp_grad");
  LinearBackward(l, "mlp_down_grad", x.t, x.ffn, x.d);
  l.Lane("scalar", "activation_grad", x.t * x.ffn, 0);
  l.Lane("vector", "activation_grad", 2 * 2 * x.t * x.ffn, 0);
  l.Dma("mlp_activation_grad_io", (m.gated_mlp ? 4 : 3) * x.t * x.ffn * x.w);
  LinearBackward(l, "mlp_up_grad", x.t, x.d, up);
  TpRegionOut(l, s, x, tp, "mlp_grad");
  Norm(l, m, y, "mlp_norm_grad", 2);
  TpRegionIn(l, s, x, tp, "attn_grad");
  LinearBackward(l, "out_proj_grad", x.t, x.heads * x.dh, x.d);
  const double qkv_io = x.t * (x.heads + x.kv) * x.dh * x.w;
  // The probabilities come back by recomputation (flash attention always, the plain layout under
  // selective checkpointing) or from HBM (kept, or written again by a full checkpoint's rerun).
  const bool selective = s.checkpointing == Checkpointing::kSelective ||
                         s.checkpointing == Checkpointing::kSelectiveMlp;
  if (!x.plain || selective) ScoresAndSoftmax(l, m, x, true);
  // dV = Pᵀ·dO and dK = dSᵀ·Q take the probabilities and the score gradient transposed. In the
  // plain layout P is read and dP written, the softmax's backward reads both and writes dS, and
  // dQ and dK read dS.
  ProbsTranspose(l, x, "attn_probs_transpose_recompute", scores);
  l.Matmul("attn_values_grad", x.s, x.s, x.dh, 2 * scores, qkv_io + x.ScoreBytes(scores, 2, x.w));
  l.Lane("vector", "softmax_grad", 2 * 3 * scores * x.s * x.s, x.ScoreBytes(scores, 3, x.w));
  if (m.dropout) {
    l.Lane("vector", "attn_dropout_grad", 2 * scores * x.s * x.s, x.ScoreBytes(scores, 1, 1));
  }
  ProbsTranspose(l, x, "attn_scores_grad_transpose", scores);
  l.Matmul("attn_scores_grad", x.s, x.s, x.dh, 2 * scores,
           2 * qkv_io + x.ScoreBytes(scores, 2, x.w));
  if (m.rms_norm) {
    l.Lane("vector", "rotary_grad", 2 * 3 * x.t * (x.heads + x.kv) * x.dh,
           2 * x.t * (x.heads + x.kv) * x.dh * x.w);
  }
  LinearBackward(l, "qkv_proj_grad", x.t, x.d, qkv);
  TpRegionOut(l, s, x, tp, "attn_grad");
  Norm(l, m, y, "attn_norm_grad", 2);
  l.Lane("vector", "residual_grad", 2 * y.t * y.d, 2 * y.t * y.d * y.w);
}

// The output projection and the loss (cross-entropy over the rank's vocabulary shard, FP32
// logits), forward and backward; with TP the max and sum are all-reduced.
void HeadAndLoss(OpList& l, const TrainSpec& s, const Dims& x, const Groups& tp) {
  const ModelShape& m = s.model;
  const double v = static_cast<double>(m.vocab) / s.tp;
  if (m.tied_head && !m.causal) {  // BERT's MLM transform before the decoder
    l.Matmul("mlm_transform", x.t, x.d, x.d);
    Norm(l, m, x, "mlm_norm", 1);
  }
  TpRegionIn(l, s, x, tp, "head");
  l.Matmul("lm_head", x.t, x.d, v);
  l.Lane("scalar", "loss_exp", x.t * v, 2 * x.t * v * 4);
  l.Lane("vector", "loss_max_sum_grad", 3 * x.t * v, 2 * x.t * v * 4);
  if (s.tp > 1) l.Collective("allreduce", "tp_allreduce_loss", 2 * x.t * 4, tp, 1);
  LinearBackward(l, "lm_head_grad", x.t, x.d, v);
  TpRegionOut(l, s, x, tp, "head_grad");
  if (m.tied_head && !m.causal) LinearBackward(l, "mlm_transform_grad", x.t, x.d, x.d);
}

// Parameters one rank of `stage` holds.
double StageParams(const TrainSpec& s, int stage) {
  const ModelShape& m = s.model;
  const double emb = static_cast<double>(m.vocab) * m.hidden / s.tp;
  double p = LayerParams(m) / s.tp * (static_cast<double>(m.layers) / s.pp);
  if (stage == 0) p += emb;
  if (stage == s.pp - 1 && !(m.tied_head && s.pp == 1)) p += emb;
  return p;
}

// One micro-batch's activations (forward) or their gradients (backward), [t, d] on every TP rank
// ([t/TP, d] with sequence parallelism), between `stage` and its neighbour `other` (none beyond
// the ends). A point-to-point transfer is
// a one-step exchange, timed as the runtime times an all-gather of both ranks' buffers: α plus
// the buffer over NeuronLink, or over EFA with the collective's fixed cost when the stages are on
// two nodes (driver-sim/README.md#training-model).
void PipelineExchange(OpList& l, const TrainSpec& s, const Dims& x, int stage, int other,
                      const char* name) {
  if (other < 0 || other >= s.pp) return;
  int nodes = 1;
  const Groups pairs = BoundaryGroups(s, stage, other, &nodes);
  const Dims y = TokenWise(s, x);
  l.Collective("allgather", name, 2 * y.t * y.d * y.w, pairs, nodes);
}

std::string MicroStep(const TrainSpec& s, int stage) {
  const ModelShape& m = s.model;
  const Dims x = DimsOf(s);
  const Groups tp = TpGroups(s);
  OpList l(s.scale, s.precision == Precision::kBf16 ? "bfloat16" : "float32");
  const int layers = m.layers / s.pp;
  if (stage == 0) l.Dma("embedding_gather", 2 * x.t * x.d * x.w);
  PipelineExchange(l, s, x, stage, stage - 1, "pp_recv_activations");
  for (int i = 0; i < layers; ++i) LayerForward(l, s, x, tp);
  PipelineExchange(l, s, x, stage, stage + 1, "pp_send_activations");
  if (stage == s.pp - 1) HeadAndLoss(l, s, x, tp);
  PipelineExchange(l, s, x, stage, stage + 1, "pp_recv_gradients");
  for (int i = 0; i < layers; ++i) {
    // A full checkpoint keeps only the layer's input: its forward runs again before its backward.
    if (s.checkpointing == Checkpointing::kFull) LayerForward(l, s, x, tp);
    LayerBackward(l, s, x, tp);
  }
  PipelineExchange(l, s, x, stage, stage - 1, "pp_send_gradients");
  if (stage == 0) l.Lane("vector", "embedding_grad", 2 * x.t * x.d, 3 * x.t * x.d * 4);
  // Gradients accumulate in FP32 across micro-steps: read the accumulator and the step's
  // gradient, write the accumulator.
  const double p = StageParams(s, stage);
  l.Lane("vector", "gradient_accumulate", 2 * p, p * (4 + 4 + x.w));
  const json memory = {{"code", 33554432},
                       {"constants", std::floor(x.w * p * s.scale)},
                       {"scratchpad", std::floor(std::max(2.0 * (1 << 30) * s.scale, 1048576.0))}};
  return l.Dump(memory);
}

std::string OptimizerPhase(const TrainSpec& s, int stage) {
  const double p = StageParams(s, stage);
  const double w = s.precision == Precision::kBf16 ? 2 : 4;
  OpList l(s.scale, "float32");
  const bool reduce = s.dp() > 1;
  const Groups dp = DpGroups(s);
  const double shard = s.zero1 && reduce ? p / s.dp() : p;
  // FP32 gradients: all-reduced, or with ZeRO-1 reduce-scattered to the rank's optimizer shard.
  if (reduce) {
    l.Collective(s.zero1 ? "reducescatter" : "allreduce", "dp_gradient_reduction", 4 * p, dp,
                 ModelledDpNodes(s));
  }
  // AdamW per parameter: FP32 master weight, m and v read and written, the gradient read, and
  // with BF16 the compute copy written; ~12 VectorE passes and a ScalarE square root. LAMB adds
  // the per-layer norms of weight and update: 4 passes and one more read of each.
  const bool lamb = s.optimizer == Optimizer::kLamb;
  const double bytes = (8 + 8 + 8 + 4 + (w == 2 ? 2 : 0) + (lamb ? 8 : 0)) * shard;
  l.Lane("vector", lamb ? "lamb_update" : "adamw_update", 2 * (lamb ? 16 : 12) * shard, bytes);
  l.Lane("scalar", "optimizer_sqrt", shard, 0);
  if (w == 2) {
    // The BF16 copy is written with stochastic rounding, as AWS's BF16 training rows run
    // ("BF16+SR"): a random word per parameter from GpSimd, added below the BF16 mantissa
    // before truncation.
    l.Lane("gpsimd", "stochastic_rounding_random", shard, 0);
    l.Lane("vector", "stochastic_rounding_add", 2 * shard, 0);
  }
  if (s.zero1 && reduce) {
    l.Collective("allgather", "zero1_param_allgather", w * p, dp, ModelledDpNodes(s));
  }
  const json memory = {{"misc", std::floor(12 * shard * s.scale)}};
  return l.Dump(memory);
}

}  // namespace

absl::StatusOr<ModelShape> FindModel(std::string_view name) {
  for (const ModelShape& m : Models()) {
    if (m.name == name) return m;
  }
  return absl::NotFoundError(
      fmt::format("unknown model \"{}\" (known: {})", name, fmt::join(ModelNames(), ", ")));
}

std::vector<std::string_view> ModelNames() {
  std::vector<std::string_view> names;
  for (const ModelShape& m : Models()) names.push_back(m.name);
  return names;
}

double ParamCount(const ModelShape& m) {
  const double emb = static_cast<double>(m.vocab) * m.hidden;
  return emb * (m.tied_head ? 1 : 2) + m.layers * LayerParams(m) + m.hidden;
}

double FlopsPerToken(const ModelShape& m, int seq) {
  return 6 * ParamCount(m) + 12.0 * m.layers * seq * m.hidden;
}

absl::Status Validate(const TrainSpec& s) {
  const ModelShape& m = s.model;
  auto bad = [](const std::string& msg) { return absl::InvalidArgumentError(msg); };
  if (m.layers < 1 || m.hidden < 1 || m.heads < 1 || m.kv_heads < 1 || m.ffn < 1 || m.vocab < 1) {
    return bad("--layers, --hidden, --heads, --kv-heads, --ffn and --vocab must be >= 1");
  }
  if (m.hidden % m.heads != 0) return bad("--hidden must be a multiple of --heads");
  if (m.heads % m.kv_heads != 0) return bad("--heads must be a multiple of --kv-heads");
  if (s.seq < 1 || s.micro_batch < 1 || s.nodes < 1 || s.tp < 1 || s.pp < 1 || !(s.scale > 0)) {
    return bad("--seq, --micro-batch, --nodes, --tp and --pp must be >= 1, --scale > 0");
  }
  if (m.heads % s.tp != 0) {
    return bad(
        fmt::format("--tp {} does not divide the model's {} attention heads", s.tp, m.heads));
  }
  if (s.sequence_parallel && s.seq % s.tp != 0) {
    return bad(
        fmt::format("--sequence-parallel splits the sequence over TP: --seq {} is not a "
                    "multiple of --tp {}",
                    s.seq, s.tp));
  }
  if (m.layers % s.pp != 0) {
    return bad(fmt::format("--pp {} does not divide the model's {} layers", s.pp, m.layers));
  }
  if (s.node_rank >= s.nodes) {
    return bad(fmt::format("node rank {} is outside a job of {} node{}", s.node_rank, s.nodes,
                           s.nodes == 1 ? "" : "s"));
  }
  // TP inside a node; a replica's stages share a node or fill whole nodes (parallel.h).
  const int width = s.tp * s.pp;
  if (s.cores_per_node < 1 || s.cores_per_node % s.tp != 0) {
    return bad(fmt::format("--tp {} must divide the {} cores of a node (TP stays in a node)", s.tp,
                           s.cores_per_node));
  }
  if (s.cores_per_node % width != 0 && width % s.cores_per_node != 0) {
    return bad(fmt::format(
        "TP {} x PP {} = {} ranks per replica must divide the {} cores of a node or be a "
        "multiple of them",
        s.tp, s.pp, width, s.cores_per_node));
  }
  if (s.cores_per_node * s.nodes % width != 0) {
    return bad(
        fmt::format("TP {} x PP {} = {} ranks per replica must divide the job's {} ranks "
                    "({} nodes of {} cores)",
                    s.tp, s.pp, width, s.cores_per_node * s.nodes, s.nodes, s.cores_per_node));
  }
  return absl::OkStatus();
}

StepOps BuildStepOps(const TrainSpec& s, int stage) {
  StepOps o;
  o.micro_step = MicroStep(s, stage);
  o.optimizer = OptimizerPhase(s, stage);
  return o;
}

}  // namespace neuron::workloads
