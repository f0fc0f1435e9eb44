#pragma once
// The model against what AWS published (driver-sim/README.md#validation,
// docs/hardware.md#validation): each figure beside the prediction of the same runtime model
// `neuron-sim run` and `neuron-sim predict` use. Calibration rows are the figures the model's
// constants were taken from; they are listed for completeness and are not evidence. Thread-safe
// (pure functions).

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace neuron::workloads {

// The one band every validation row is checked against (the published figures themselves move
// ±10-15 % between SDK releases).
inline constexpr double kValidationBand = 0.20;

struct ValidationRow {
  std::string name;
  std::string unit;
  double published = 0;
  double predicted = 0;
  std::string source;
  bool calibration = false;  // the model was fitted to this row: excluded from validation

  double Error() const { return (predicted - published) / published; }
};

// Every row, calibrations first. An error when a prediction cannot be made (a bug).
absl::StatusOr<std::vector<ValidationRow>> ValidationTable();
// The table as text: one row per line, published, predicted, error, source.
std::string ValidationText(const std::vector<ValidationRow>& rows);

}  // namespace neuron::workloads
