// The device model against AWS's published figures (driver-sim/README.md#validation): the
// mechanisms' own measurements (calibration rows marked) and every published trn1 training
// figure, each beside the prediction and the error. `--markdown` prints the training part as
// docs/model-validation.md holds it. Exits 1 when the figures cannot be read or a prediction
// cannot be made.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "core/base/guarded_main.h"
#include "driver-sim/model/published_training.h"
#include "driver-sim/model/validation.h"

namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "model_validation: %s\n", std::string{s.message()}.c_str());
  return 1;
}

int Main(int argc, char** argv) {
  CLI::App app{"the device model against AWS's published figures"};
  std::string published = NEURON_PUBLISHED_DIR;
  bool markdown = false;
  app.add_option("--published", published,
                 "the directory of trn1_training_rows.csv (this checkout's driver-sim/model/"
                 "published)");
  app.add_flag("--markdown", markdown,
               "print only the training figures, as docs/model-validation.md holds them");
  CLI11_PARSE(app, argc, argv);
  namespace w = neuron::workloads;
  const absl::StatusOr<w::TrainingTable> training =
      w::ScorePublishedTraining(published + "/trn1_training_rows.csv");
  if (!training.ok()) return Fail(training.status());
  if (!markdown) {
    const absl::StatusOr<std::vector<w::ValidationRow>> rows = w::ValidationTable();
    if (!rows.ok()) return Fail(rows.status());
    std::fputs(w::ValidationText(*rows).c_str(), stdout);
    std::fputs("\n", stdout);
  }
  std::fputs(w::TrainingMarkdown(*training).c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return neuron::GuardedMain("model_validation", Main, argc, argv);
}
