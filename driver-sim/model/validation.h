#pragma once
// The model's mechanisms against what AWS published of each (driver-sim/README.md#validation,
// docs/hardware.md#validation): each figure beside the prediction of the same runtime model
// `neuron-sim run` and `neuron-sim predict` use. Calibration rows are the figures the model's
// constants were taken from; they are listed for completeness and are not evidence. The training
// figures are published_training.h's.
// Thread-safe (pure functions).

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace neuron::workloads {

// The one band every validation row is checked against (the published figures themselves move
// ±10-15 % between SDK releases).
inline constexpr double kValidationBand = 0.20;

enum class RowRole { kCalibration, kMicrobenchmark, kCollective };

struct ValidationRow {
  std::string name;
  std::string unit;
  double published = 0;
  double predicted = 0;
  std::string source;
  RowRole role = RowRole::kMicrobenchmark;

  bool calibration() const { return role == RowRole::kCalibration; }
  double Error() const { return (predicted - published) / published; }
};

// Every row, calibrations first. An error when a prediction cannot be made (a bug).
absl::StatusOr<std::vector<ValidationRow>> ValidationTable();

// The median and largest of |error| over `errors` (each with the name of its row).
struct ErrorSummary {
  int rows = 0;
  double median = 0;
  double worst = 0;
  std::string worst_row;
};
ErrorSummary Summarise(const std::vector<std::pair<double, std::string>>& errors);

// The table as text: one row per line, published, predicted, error, role and source.
std::string ValidationText(const std::vector<ValidationRow>& rows);

}  // namespace neuron::workloads
