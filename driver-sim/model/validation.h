#pragma once
// The model against what AWS published (driver-sim/README.md#validation,
// docs/hardware.md#validation): each figure beside the prediction of the same runtime model
// `neuron-sim run` and `neuron-sim predict` use. Calibration rows are the figures the model's
// constants were taken from; they are listed for completeness and are not evidence. A figure
// published differently by several SDK releases is scored against the middle of its range.
// Thread-safe (pure functions).

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace neuron::workloads {

// The one band every validation row is checked against (the published figures themselves move
// ±10-15 % between SDK releases).
inline constexpr double kValidationBand = 0.20;

enum class RowRole { kCalibration, kMicrobenchmark, kCollective, kTraining };

struct ValidationRow {
  std::string name;
  std::string unit;
  double published = 0;  // the figure, or the middle of the range the SDK releases published
  double predicted = 0;
  std::string source;
  RowRole role = RowRole::kMicrobenchmark;
  std::string range;  // "81-101.3 (2.15-2.21)" when the releases differ; empty otherwise

  bool calibration() const { return role == RowRole::kCalibration; }
  double Error() const { return (predicted - published) / published; }
};

// Every row, calibrations first. An error when a prediction cannot be made (a bug).
absl::StatusOr<std::vector<ValidationRow>> ValidationTable();

// |error| over the training rows (calibrations are never training rows).
struct ErrorSummary {
  int rows = 0;
  double median = 0;
  double worst = 0;
  std::string worst_row;
};
ErrorSummary TrainingErrors(const std::vector<ValidationRow>& rows);

// The table as text: one row per line, published, predicted, error, role and source; then the
// training rows' median and worst |error|.
std::string ValidationText(const std::vector<ValidationRow>& rows);

}  // namespace neuron::workloads
