// The device model against AWS's published figures. The mechanisms' own measurements
// (docs/hardware.md#validation): the docs table is the table the model prints, every row with its
// verdict; calibration rows reproduce the figure they were taken from. Every published trn1
// training figure (docs/model-validation.md): the rules leave out what they say, the docs hold the
// table the model prints, line for line, so a row or a summary that moves fails here until the
// docs say so; and the catalog's shapes are those of published/models.csv.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "driver-sim/model/published_rows.h"
#include "driver-sim/model/published_training.h"
#include "driver-sim/model/validation.h"
#include "tests/support/temp_dir.h"

namespace neuron::workloads {
namespace {

using ::testing::HasSubstr;

const std::string kPublished = std::string(NEURON_SOURCE_DIR) + "/driver-sim/model/published";

std::vector<ValidationRow> Rows() {
  absl::StatusOr<std::vector<ValidationRow>> rows = ValidationTable();
  EXPECT_TRUE(rows.ok()) << rows.status();
  return rows.ok() ? *rows : std::vector<ValidationRow>{};
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string HardwareDoc() { return ReadText(std::string(NEURON_SOURCE_DIR) + "/docs/hardware.md"); }

// The docs' table line for a row: the one that starts with "| <name> |".
std::string DocLine(const std::string& doc, const std::string& name) {
  const size_t at = doc.find("\n| " + name + " |");
  if (at == std::string::npos) return "";
  const size_t end = doc.find('\n', at + 1);
  return doc.substr(at + 1, end - at - 1);
}

TEST(ModelValidation, TheDocsTableGivesEveryRowItsVerdict) {
  ASSERT_DOUBLE_EQ(kValidationBand, 0.20);
  const std::string doc = HardwareDoc();
  ASSERT_FALSE(doc.empty());
  int outside = 0;
  for (const ValidationRow& r : Rows()) {
    const std::string line = DocLine(doc, r.name);
    ASSERT_FALSE(line.empty()) << "docs/hardware.md#validation has no row \"" << r.name << "\"";
    // The error as the table prints it, one decimal.
    EXPECT_NE(line.find(fmt::format("{:+.1f} %", r.Error() * 100)), std::string::npos)
        << r.name << ": the model now gives " << fmt::format("{:+.1f} %", r.Error() * 100)
        << "; the docs say: " << line;
    if (r.calibration()) continue;
    const bool out = std::abs(r.Error()) > kValidationBand;
    outside += out ? 1 : 0;
    EXPECT_EQ(line.find("outside") != std::string::npos, out)
        << r.name << (out ? " is outside the band" : " is inside the band")
        << "; the docs say: " << line;
  }
  EXPECT_GT(outside, 0);  // the known misses: the docs name each one's missing mechanism
}

TEST(ModelValidation, CalibrationRowsReproduceTheFigureTheyWereTakenFrom) {
  int calibrations = 0;
  for (const ValidationRow& r : Rows()) {
    if (!r.calibration()) continue;
    ++calibrations;
    EXPECT_NEAR(r.predicted, r.published, r.published * 0.01) << r.name;
  }
  // TensorE efficiency, ring bandwidth, the chip-to-chip step, the EFA fixed cost.
  EXPECT_EQ(calibrations, 4);
}

// Scored once for the suite (about 240 predictions).
const TrainingTable& Training() {
  static const TrainingTable table = [] {
    absl::StatusOr<TrainingTable> t =
        ScorePublishedTraining(kPublished + "/trn1_training_rows.csv");
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : TrainingTable{};
  }();
  return table;
}

// docs/model-validation.md holds, between its markers, exactly what `model_validation
// --markdown` prints: every kept row's error after each step, the rules' counts and the summaries.
TEST(ModelValidation, TheTrainingDocHoldsTheTableTheModelPrints) {
  const std::string doc = ReadText(std::string(NEURON_SOURCE_DIR) + "/docs/model-validation.md");
  const std::string begin = "<!-- model_validation --markdown: begin -->\n";
  const std::string end = "<!-- model_validation --markdown: end -->";
  const size_t from = doc.find(begin);
  const size_t to = doc.find(end);
  ASSERT_NE(from, std::string::npos);
  ASSERT_NE(to, std::string::npos);
  std::istringstream want(TrainingMarkdown(Training()));
  std::istringstream have(doc.substr(from + begin.size(), to - from - begin.size()));
  std::string w, h;
  int line = 0;
  while (std::getline(want, w)) {
    ++line;
    ASSERT_TRUE(std::getline(have, h)) << "the docs' table ends before line " << line << ": " << w;
    ASSERT_EQ(h, w) << "line " << line << " of the generated part: rerun "
                    << "`build/dev/bench/model_validation --markdown` and update the docs";
  }
  EXPECT_FALSE(std::getline(have, h) && !h.empty()) << "the docs' table has more: " << h;
}

// The prose that quotes the summary (docs/hardware.md#validation, docs/model-validation.md#result)
// quotes the figures the table prints.
TEST(ModelValidation, TheDocsProseQuotesTheTablesSummary) {
  const TrainingTable& t = Training();
  const ErrorSummary all = StepErrors(t, ModelStep::kAttentionLayout);
  const ErrorSummary longer = StepErrors(t, ModelStep::kAttentionLayout, 2049);
  const std::string hardware = HardwareDoc();
  const std::string page = ReadText(std::string(NEURON_SOURCE_DIR) + "/docs/model-validation.md");
  EXPECT_THAT(hardware, HasSubstr(fmt::format("median |error| is {:.1f} % and the worst {:.1f} %",
                                              all.median * 100, all.worst * 100)));
  EXPECT_THAT(page, HasSubstr(fmt::format("the median is {:.1f} % and the worst {:.1f} %",
                                          all.median * 100, all.worst * 100)));
  EXPECT_THAT(page, HasSubstr(fmt::format("are at {:.1f} % and {:.1f} %", longer.median * 100,
                                          longer.worst * 100)));
}

// The rules are the collector's (published/README.md), applied by the code: where the collector
// marked rule 1 or 2 the code finds the same first rule, and rule 4 takes only rows whose layout,
// batch or unit was not published.
TEST(ModelValidation, TheExclusionRulesAgreeWithTheCollectorsMarks) {
  absl::StatusOr<std::vector<PublishedRow>> rows =
      ReadPublishedRows(kPublished + "/trn1_training_rows.csv");
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::map<Exclusion, int> seen;
  for (const PublishedRow& r : *rows) {
    SCOPED_TRACE(fmt::format("line {}: {}", r.csv_line, r.model));
    const std::optional<Exclusion> e = ExclusionOf(r);
    if (e) ++seen[*e];
    const std::string first = r.excluded_by.substr(0, r.excluded_by.find(';'));
    const std::map<std::string, Exclusion> marks = {
        {"1", Exclusion::kRanks}, {"2", Exclusion::kModel}, {"3", Exclusion::kNotTraining}};
    if (auto mark = marks.find(first); mark != marks.end()) {
      EXPECT_EQ(e, mark->second);
    }
    if (first.empty() && e) {
      EXPECT_EQ(e, Exclusion::kLayout);
      EXPECT_TRUE(r.nodes == 0 || r.tp == 0 || r.pp == 0 || r.dp == 0 || r.micro_batch == 0 ||
                  r.global_batch == 0 || !r.instance.starts_with("trn1") ||
                  r.unit.find("unit not printed") != std::string::npos)
          << r.unit;
    }
  }
  const TrainingTable& t = Training();
  EXPECT_EQ(t.read, static_cast<int>(rows->size()));
  for (int i = 0; i < kExclusions; ++i) {
    EXPECT_EQ(t.excluded[i], seen[static_cast<Exclusion>(i)])
        << ExclusionText(static_cast<Exclusion>(i));
  }
  EXPECT_EQ(t.read, static_cast<int>(t.rows.size()) + seen[Exclusion::kRanks] +
                        seen[Exclusion::kModel] + seen[Exclusion::kNotTraining] +
                        seen[Exclusion::kLayout]);
}

// A step a row's recipe does not run leaves its prediction where it was: BERT (TP 1, no
// checkpointing) moves only with the attention layout, Llama-2-7B's NxD job (flash) not with it.
TEST(ModelValidation, EachStepMovesOnlyTheRowsWhoseRecipeRunsIt) {
  int bert = 0, llama = 0;
  for (const ScoredRow& r : Training().rows) {
    const auto& p = r.predicted;
    if (r.row.model_key == "bert-large") {
      ++bert;
      EXPECT_EQ(p[0], p[2]) << r.row.csv_line;
      EXPECT_NE(p[2], p[3]) << r.row.csv_line;
    }
    if (r.row.model_key == "llama2-7b" && r.row.framework.starts_with("NxD")) {
      ++llama;
      EXPECT_NE(p[0], p[1]) << r.row.csv_line;
      EXPECT_EQ(p[1], p[3]) << r.row.csv_line;
    }
  }
  EXPECT_GT(bert, 100);
  EXPECT_GT(llama, 5);
}

// Units: a step time is the global batch over the time. The Megatron-LM tutorial's log line gives
// both for one run, "elapsed time per iteration (ms): 8718.9 ... throughput: 7.340": the step
// time scored as sequences per second is the throughput the same line prints.
TEST(ModelValidation, StepTimesAreScoredAsSequencesPerSecond) {
  int step_times = 0;
  for (const ScoredRow& r : Training().rows) {
    if (!r.row.unit.starts_with("step time ms")) continue;
    ++step_times;
    EXPECT_EQ(r.row.figure, "8718.9");
    EXPECT_NEAR(r.published, 7.340, 0.0005);
  }
  EXPECT_EQ(step_times, 1);
}

// The catalog's shapes are those models.csv gives, with their sources.
TEST(ModelValidation, TheCatalogHasTheDimensionsModelsCsvPublishes) {
  std::istringstream in(ReadText(kPublished + "/models.csv"));
  std::string line;
  std::getline(in, line);  // the header
  int checked = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::istringstream row(line);
    for (std::string cell; std::getline(row, cell, ',');) cells.push_back(cell);
    if (cells.size() < 9 || cells[2] != "yes") continue;  // not a transformer
    SCOPED_TRACE(cells[0]);
    absl::StatusOr<ModelShape> m = FindModel(cells[0]);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(std::to_string(m->layers), cells[3]);
    EXPECT_EQ(std::to_string(m->hidden), cells[4]);
    EXPECT_EQ(std::to_string(m->heads), cells[5]);
    EXPECT_EQ(std::to_string(m->kv_heads), cells[6]);
    EXPECT_EQ(std::to_string(m->ffn), cells[7]);
    if (cells[8].starts_with("n/a")) continue;  // ViT: its head, not a vocabulary
    EXPECT_EQ(std::to_string(m->vocab), cells[8].substr(0, cells[8].find(' ')));
    ++checked;
  }
  EXPECT_EQ(checked, 11);
}

// What the reader says of a file it cannot take: the line and the column, or the file.
TEST(ModelValidation, ABadFileIsAnErrorNamingWhere) {
  const neuron::testing::TempDir tmp("published");
  const std::string header =
      "model,instance,nodes,tp,pp,dp,seq_len,micro_batch,global_batch,precision,optimizer,zero1,"
      "sequence_parallel,activation_checkpointing,flash_attention,figure,unit,sdk_release,"
      "framework,source_file,source_commit,source_line,excluded_by,model_key,source_kind\n";
  const auto write = [&](const std::string& text) {
    std::ofstream(tmp.path() / "rows.csv") << text;
    return ReadPublishedRows(tmp.path() / "rows.csv");
  };
  absl::StatusOr<std::vector<PublishedRow>> ok =
      write(header +
            "\"A, quoted\",trn1.32xlarge,1,8,1,4,2048,1,64,BF16,AdamW,no,no,none,no,"
            "7.3,seq/s,2.3.0,Megatron-LM,f.rst,abc,12,,gpt3-6.7b,tutorial_log\n");
  ASSERT_TRUE(ok.ok()) << ok.status();
  ASSERT_EQ(ok->size(), 1u);
  EXPECT_EQ((*ok)[0].model, "A, quoted");
  EXPECT_EQ((*ok)[0].csv_line, 2);
  EXPECT_EQ((*ok)[0].seq, 2048);
  absl::StatusOr<std::vector<PublishedRow>> bad =
      write(header +
            "m,trn1.32xlarge,one,8,1,4,2048,1,64,BF16,AdamW,no,no,none,no,7.3,seq/s,"
            "2.3.0,Megatron-LM,f.rst,abc,12,,gpt3-6.7b,tutorial_log\n");
  EXPECT_THAT(bad.status().message(), HasSubstr("line 2: column nodes is \"one\""));
  absl::StatusOr<std::vector<PublishedRow>> missing = write("model,instance\nm,trn1\n");
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("nodes"));
  EXPECT_FALSE(ReadPublishedRows(tmp.path() / "absent.csv").ok());
}

}  // namespace
}  // namespace neuron::workloads
