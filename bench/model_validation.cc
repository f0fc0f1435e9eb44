// The device model against AWS's published figures (driver-sim/README.md#validation): the
// mechanisms' own measurements (calibration rows marked) and every published trn1 training
// figure, each beside the prediction and the error. `--markdown` prints the training part as
// docs/model-validation.md holds it. Exits 1 when the figures cannot be read or a prediction
// cannot be made.
#include <cstdio>
#include <string>
#include <string_view>

#include "core/base/guarded_main.h"
#include "driver-sim/model/published_training.h"
#include "driver-sim/model/validation.h"

namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "model_validation: %s\n", std::string{s.message()}.c_str());
  return 1;
}

// Two flags, read by hand as the other benchmarks read theirs: CLI11's headers would cost this
// one-file program most of its compile time.
int Main(int argc, char** argv) {
  std::string published = NEURON_PUBLISHED_DIR;
  bool markdown = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--markdown") {
      markdown = true;
    } else if (a == "--published" && i + 1 < argc) {
      published = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: model_validation [--markdown] [--published DIR]\n"
                   "  --markdown       only the training figures, as docs/model-validation.md "
                   "holds them\n"
                   "  --published DIR  the directory of trn1_training_rows.csv (this checkout's "
                   "driver-sim/model/published)\n");
      return 2;
    }
  }
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
