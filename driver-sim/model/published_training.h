#pragma once
// Every trn1 training figure AWS has published (published_rows.h) beside what the model predicts
// of it (docs/model-validation.md): the rules that leave a row out, applied before any error is
// looked at; the recipe each row ran (its own cells, else its framework's recipe); and the
// prediction after each step of the model, so that a reader sees which mechanism moved which row.
// No row is a calibration point. Thread-safe (pure functions).

#include <array>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "driver-sim/model/published_rows.h"
#include "driver-sim/model/transformer.h"
#include "driver-sim/model/validation.h"

namespace neuron::workloads {

// The model's steps, each adding one mechanism to the one before, applied where the row's recipe
// runs it. kRoundTwo is the model before them: no sequence parallelism, the attention core
// recomputed, flash attention.
enum class ModelStep { kRoundTwo, kSequenceParallel, kCheckpointing, kAttentionLayout };
inline constexpr int kModelSteps = 4;
const char* StepName(ModelStep step);

// How a row's job ran, from its own cells where it says, else its framework's recipe
// (docs/model-validation.md#recipes).
struct Recipe {
  bool zero1 = false;
  bool sequence_parallel = false;
  Checkpointing checkpointing = Checkpointing::kSelective;
  Attention attention = Attention::kFlash;
};

struct ScoredRow {
  PublishedRow row;
  int seq = 0;           // as scored: the row's, or derived (docs/model-validation.md#rules)
  double published = 0;  // seq/s, converted from the row's unit
  Recipe recipe;
  std::array<double, kModelSteps> predicted{};  // seq/s after each step

  double Error(ModelStep step = ModelStep::kAttentionLayout) const {
    return (predicted[static_cast<int>(step)] - published) / published;
  }
};

// Why a row is left out, in the order the rules are applied; a row counts under the first it
// meets.
enum class Exclusion { kRanks, kModel, kNotTraining, kLayout };
inline constexpr int kExclusions = 4;
const char* ExclusionText(Exclusion e);

struct TrainingTable {
  int read = 0;
  std::array<int, kExclusions> excluded{};  // rows each rule removed
  std::vector<ScoredRow> rows;
};

// The rule that leaves `r` out, if one does (nullopt: kept).
std::optional<Exclusion> ExclusionOf(const PublishedRow& r);

// Reads `csv` (trn1_training_rows.csv), applies the rules and scores every kept row. An error
// when the file cannot be read or a kept row cannot be predicted (a bug).
absl::StatusOr<TrainingTable> ScorePublishedTraining(const std::filesystem::path& csv);

// |error| at `step` over the rows whose scored sequence is within [min_seq, max_seq].
ErrorSummary StepErrors(const TrainingTable& t, ModelStep step, int min_seq = 0,
                        int max_seq = 1 << 30);

// docs/model-validation.md's generated part: the rules' counts, the summary per step and by
// sequence length, and a line per scored row.
std::string TrainingMarkdown(const TrainingTable& t);

}  // namespace neuron::workloads
