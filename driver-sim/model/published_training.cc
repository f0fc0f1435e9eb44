#include "driver-sim/model/published_training.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <string_view>

#include "driver-sim/model/predict.h"

namespace neuron::workloads {
namespace {

constexpr int kCoresPerNode = 32;  // trn1.32xlarge and trn1n.32xlarge, LNC 1

// The recipe each framework's published job ran, from the launch scripts its tutorial runs (where
// a tutorial's prose and its script disagree, the script: it is what ran).
// docs/model-validation.md#recipes gives each source line. A framework is matched by the start of
// the row's framework cell, a model by its key; "*" is any model.
struct RecipeRow {
  std::string_view framework;
  std::string_view model;
  Recipe recipe;
};
constexpr Checkpointing kNoCkpt = Checkpointing::kNone;
constexpr Checkpointing kSel = Checkpointing::kSelective;
constexpr Checkpointing kSelMlp = Checkpointing::kSelectiveMlp;
constexpr Checkpointing kFull = Checkpointing::kFull;
constexpr Attention kFlash = Attention::kFlash;
constexpr Attention kPlain = Attention::kPlain;
constexpr RecipeRow kRecipes[] = {
    // HF BertForPreTraining / ViT under torch-xla: eager attention, no gradient checkpointing.
    {"HF", "*", {false, false, kNoCkpt, kPlain}},
    // aws-neuron-reference-for-megatron-lm: no sequence parallelism, no recomputation.
    {"Megatron-LM", "*", {false, false, kNoCkpt, kPlain}},
    // neuronx-nemo-megatron: bf16SR leaves ZeRO off; sequence parallel on; flash attention off.
    {"NeMo", "gpt3-23b", {false, true, kSel, kPlain}},
    {"NeMo", "gpt3-46b", {false, true, kFull, kPlain}},
    {"NeMo", "gpt3-175b", {false, true, kSel, kPlain}},
    {"NeMo", "*", {false, true, kFull, kPlain}},  // test_llama.sh: Llama-2 7B and 13B
    // neuronx-distributed: ZeRO-1, sequence parallel, selective checkpointing (the MLP too at
    // sequence 8,192); flash attention where the script turns it on.
    {"NxD", "llama2-13b", {true, true, kSel, kPlain}},
    {"NxD", "llama2-70b", {true, true, kSel, kPlain}},
    {"NxD", "llama3.1-70b", {true, true, kSelMlp, kFlash}},
    {"NxD", "*", {true, true, kSel, kFlash}},  // the TP + ZeRO-1 scripts: 7B, 8B
};

bool Contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

std::optional<Recipe> RecipeOf(const PublishedRow& r) {
  for (const RecipeRow& row : kRecipes) {
    if (r.framework.starts_with(row.framework) && (row.model == "*" || row.model == r.model_key)) {
      return row.recipe;
    }
  }
  return std::nullopt;
}

// The sequence a row ran: its own, else what its model and phase fix. ViT-B/16 reads 197
// tokens at 224x224; BERT's phase 2 runs 512 in the tutorial every BERT row links, which the
// encoder table's "Ph2 ... 128" rows (2.16-2.22) contradict (their throughput is phase 2's).
int SeqOf(const PublishedRow& r) {
  if (r.model_key == "vit-base" && r.seq == 0) return 197;
  if (r.model_key == "bert-large" && Contains(r.model, "Ph2")) return 512;
  return r.seq;
}

// The row's figure in sequences per second of the whole job, if its unit says how.
std::optional<double> SeqPerSecond(const PublishedRow& r) {
  double figure = 0;
  std::string_view text = r.figure;
  if (text.starts_with("~")) text.remove_prefix(1);  // "~7.3 seq/sec" in a tutorial's prose
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), figure);
  if (error != std::errc() || end != text.data() + text.size() || figure <= 0) return std::nullopt;
  const double batch = r.global_batch;
  if (r.unit.starts_with("seq/s")) return figure;
  if (r.unit.starts_with("step time ms")) return batch / (figure / 1000);
  if (r.unit.starts_with("s/it")) return batch / figure;
  if (r.unit.starts_with("it/s")) return batch * figure;
  return std::nullopt;
}

bool LayoutPublished(const PublishedRow& r) {
  return r.instance.starts_with("trn1") && r.nodes > 0 && r.tp > 0 && r.pp > 0 && r.dp > 0 &&
         r.micro_batch > 0 && r.global_batch > 0 && SeqOf(r) > 0 && SeqPerSecond(r).has_value() &&
         RecipeOf(r).has_value();
}

// The spec row `r` ran, with the model's mechanisms up to `step` applied as its recipe runs them.
TrainSpec RowSpec(const PublishedRow& r, const ModelShape& m, const Recipe& recipe,
                  ModelStep step) {
  TrainSpec s;
  s.model = m;
  s.seq = SeqOf(r);
  s.micro_batch = r.micro_batch;
  s.tp = r.tp;
  s.pp = r.pp;
  s.nodes = r.nodes;
  s.cores_per_node = kCoresPerNode;
  s.precision = r.precision == "FP32" ? Precision::kFp32 : Precision::kBf16;
  s.optimizer = r.optimizer == "Lamb" ? Optimizer::kLamb : Optimizer::kAdamW;
  s.zero1 = recipe.zero1;
  const int n = static_cast<int>(step);
  s.sequence_parallel = n >= 1 && recipe.sequence_parallel && r.tp > 1;
  if (n >= 2) s.checkpointing = recipe.checkpointing;
  if (n >= 3) s.attention = recipe.attention;
  return s;
}

// Predictions, memoised: most rows share a configuration with others (releases, revisions).
class Predictor {
 public:
  absl::StatusOr<double> SeqPerS(const TrainSpec& s, int global_batch) {
    // Flash attention recomputes its tiles whatever the checkpointing: none is selective there.
    const Checkpointing ckpt =
        s.attention == Attention::kFlash && s.checkpointing == Checkpointing::kNone
            ? Checkpointing::kSelective
            : s.checkpointing;
    const std::string key = fmt::format(
        "{} {} {} {} {} {} {} {} {} {} {} {} {}", s.model.name, s.seq, s.micro_batch, s.tp, s.pp,
        s.nodes, static_cast<int>(s.precision), static_cast<int>(s.optimizer), s.zero1,
        s.sequence_parallel, static_cast<int>(ckpt), static_cast<int>(s.attention), global_batch);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    PredictRequest req;
    req.train = s;
    req.global_batch = global_batch;
    absl::StatusOr<Prediction> p = Predict(req);
    if (!p.ok()) return p.status();
    memo_.emplace(key, p->seq_per_s);
    return p->seq_per_s;
  }

 private:
  std::map<std::string, double> memo_;
};

absl::StatusOr<ScoredRow> Score(const PublishedRow& r, Predictor& predictor) {
  absl::StatusOr<ModelShape> m = FindModel(r.model_key);
  if (!m.ok()) return m.status();
  ScoredRow out;
  out.row = r;
  out.seq = SeqOf(r);
  out.published = *SeqPerSecond(r);
  out.recipe = *RecipeOf(r);
  for (int step = 0; step < kModelSteps; ++step) {
    const TrainSpec s = RowSpec(r, *m, out.recipe, static_cast<ModelStep>(step));
    absl::StatusOr<double> seq = predictor.SeqPerS(s, r.global_batch);
    if (!seq.ok()) {
      return absl::InternalError(fmt::format("line {} ({}): {}", r.csv_line, r.model,
                                             std::string{seq.status().message()}));
    }
    out.predicted[step] = *seq;
  }
  return out;
}

}  // namespace

const char* StepName(ModelStep step) {
  switch (step) {
    case ModelStep::kRoundTwo:
      return "round two";
    case ModelStep::kSequenceParallel:
      return "+ sequence parallelism";
    case ModelStep::kCheckpointing:
      return "+ checkpointing";
    case ModelStep::kAttentionLayout:
      return "+ attention layout";
  }
  return "?";
}

const char* ExclusionText(Exclusion e) {
  switch (e) {
    case Exclusion::kRanks:
      return "1: its ranks (TP x PP x DP) are not its nodes' 32 cores each";
    case Exclusion::kModel:
      return "2: its model is not a transformer whose dimensions are known";
    case Exclusion::kNotTraining:
      return "3: not a training throughput or step time";
    case Exclusion::kLayout:
      return "4: its layout, batch, sequence, unit or recipe is not published";
  }
  return "?";
}

std::optional<Exclusion> ExclusionOf(const PublishedRow& r) {
  if (r.nodes > 0 && r.tp > 0 && r.pp > 0 && r.dp > 0 &&
      r.tp * r.pp * r.dp != r.nodes * kCoresPerNode) {
    return Exclusion::kRanks;
  }
  if (!FindModel(r.model_key).ok()) return Exclusion::kModel;
  // Which figures a page printed for something other than training throughput (a compile trial,
  // an evaluation) is the collector's reading of the page, kept in the file as rule 3.
  if (Contains(r.excluded_by, "3")) return Exclusion::kNotTraining;
  if (!LayoutPublished(r)) return Exclusion::kLayout;
  return std::nullopt;
}

absl::StatusOr<TrainingTable> ScorePublishedTraining(const std::filesystem::path& csv) {
  absl::StatusOr<std::vector<PublishedRow>> rows = ReadPublishedRows(csv);
  if (!rows.ok()) return rows.status();
  TrainingTable t;
  t.read = static_cast<int>(rows->size());
  Predictor predictor;
  for (const PublishedRow& r : *rows) {
    if (std::optional<Exclusion> e = ExclusionOf(r)) {
      ++t.excluded[static_cast<int>(*e)];
      continue;
    }
    absl::StatusOr<ScoredRow> scored = Score(r, predictor);
    if (!scored.ok()) return scored.status();
    t.rows.push_back(*std::move(scored));
  }
  return t;
}

ErrorSummary StepErrors(const TrainingTable& t, ModelStep step, int min_seq, int max_seq) {
  std::vector<std::pair<double, std::string>> errors;
  for (const ScoredRow& r : t.rows) {
    if (r.seq < min_seq || r.seq > max_seq) continue;
    errors.emplace_back(r.Error(step), fmt::format("line {}", r.row.csv_line));
  }
  return Summarise(errors);
}

namespace {

std::string Percent(double e) { return fmt::format("{:+.1f} %", e * 100); }

std::string SummaryCell(const ErrorSummary& s) {
  if (s.rows == 0) return "no rows";
  return fmt::format("{:.1f} % / {:.1f} % ({} rows)", s.median * 100, s.worst * 100, s.rows);
}

const char* CheckpointingName(Checkpointing c) {
  switch (c) {
    case Checkpointing::kNone:
      return "none";
    case Checkpointing::kSelective:
      return "selective";
    case Checkpointing::kSelectiveMlp:
      return "selective+MLP";
    case Checkpointing::kFull:
      return "full";
  }
  return "?";
}

std::string RecipeText(const ScoredRow& r) {
  const Recipe& c = r.recipe;
  return fmt::format(
      "{}{}{}, {}", c.zero1 ? "ZeRO-1, " : "", c.sequence_parallel && r.row.tp > 1 ? "SP, " : "",
      CheckpointingName(c.checkpointing), c.attention == Attention::kFlash ? "flash" : "plain");
}

std::string RowLine(const ScoredRow& r) {
  const PublishedRow& p = r.row;
  std::string line = fmt::format(
      "| {} | {} | {} n, TP{} PP{} DP{}, seq {}, mb {}, gb {}, {}, {} | {} | {} | {:.6g} |",
      p.csv_line, p.model, p.nodes, p.tp, p.pp, p.dp, r.seq, p.micro_batch, p.global_batch,
      p.precision, p.optimizer, RecipeText(r), p.sdk_release, r.published);
  for (int step = 0; step < kModelSteps; ++step) {
    line += " " + Percent(r.Error(static_cast<ModelStep>(step))) + " |";
  }
  const std::string file = p.source_file.substr(p.source_file.rfind('/') + 1);
  return line + fmt::format(" {:.6g} | {}@{}:{} |\n", r.predicted[kModelSteps - 1], file,
                            p.source_commit.substr(0, 7), p.source_line);
}

}  // namespace

std::string TrainingMarkdown(const TrainingTable& t) {
  std::string out =
      fmt::format("Rows read: {}; kept and scored: {}.\n\n| rule | rows it removed |\n|---|---|\n",
                  t.read, t.rows.size());
  for (int e = 0; e < kExclusions; ++e) {
    out += fmt::format("| {} | {} |\n", ExclusionText(static_cast<Exclusion>(e)), t.excluded[e]);
  }
  out +=
      "\n| step | all rows: median / worst \\|error\\| | sequence <= 2,048 | sequence > 2,048 |\n"
      "|---|---|---|---|\n";
  for (int step = 0; step < kModelSteps; ++step) {
    const ModelStep s = static_cast<ModelStep>(step);
    out += fmt::format("| {} | {} | {} | {} |\n", StepName(s), SummaryCell(StepErrors(t, s)),
                       SummaryCell(StepErrors(t, s, 0, 2048)), SummaryCell(StepErrors(t, s, 2049)));
  }
  out += "\n| line | figure | layout | recipe | SDK | published seq/s";
  for (int step = 0; step < kModelSteps; ++step) {
    out += fmt::format(" | {}", StepName(static_cast<ModelStep>(step)));
  }
  out += " | predicted seq/s | source |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const ScoredRow& r : t.rows) out += RowLine(r);
  return out;
}

}  // namespace neuron::workloads
