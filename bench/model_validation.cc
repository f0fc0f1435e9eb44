// The device model against AWS's published figures (driver-sim/README.md#validation): each figure
// beside the prediction and the error, calibration rows marked. Exits 1 when a prediction cannot
// be made.
#include <cstdio>
#include <string>

#include "driver-sim/model/validation.h"

int main() {
  const absl::StatusOr<std::vector<neuron::workloads::ValidationRow>> rows =
      neuron::workloads::ValidationTable();
  if (!rows.ok()) {
    std::fprintf(stderr, "model_validation: %s\n", std::string{rows.status().message()}.c_str());
    return 1;
  }
  std::fputs(neuron::workloads::ValidationText(*rows).c_str(), stdout);
  return 0;
}
