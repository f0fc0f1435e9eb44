#pragma once
// AWS's published trn1 training figures as collected in driver-sim/model/published/
// (trn1_training_rows.csv; its README says how), one struct per figure, cells as published:
// numbers that were not published are 0, texts as the file spells them. Reading only; what is
// kept and how a row is scored is validation.h's. Thread-safe (pure functions).

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace neuron::workloads {

struct PublishedRow {
  int csv_line = 0;       // 1-based line of trn1_training_rows.csv (the header is line 1)
  std::string model;      // as published: "HuggingFace BERT-Large Ph1 pre-training"
  std::string model_key;  // models.csv's key: "bert-large"
  std::string instance;   // "trn1.32xlarge", "trn1.32xlarge/trn1n.32xlarge", "unknown (...)"
  int nodes = 0, tp = 0, pp = 0, dp = 0, seq = 0, micro_batch = 0, global_batch = 0;
  std::string precision;  // verbatim: "Autocast:BF16+SR", "FP32", ...
  std::string optimizer;  // "AdamW", "Lamb", "Adam", "unknown"
  // The recipe's switches where the row or its tutorial says them: "yes", "no", "selective",
  // "unknown", sometimes with a parenthesis saying where from.
  std::string zero1, sequence_parallel, activation_checkpointing, flash_attention;
  std::string figure;  // verbatim: "3836.4653", "~7.3"
  std::string unit;    // "seq/s", "s/it (tqdm)", "step time ms (...)", ...
  std::string sdk_release, framework, source_file, source_commit;
  int source_line = 0;
  std::string excluded_by;  // the collector's rule numbers, ";"-separated (README's rules)
  std::string source_kind;  // "benchmark_table" or "tutorial_log"
};

// Every row of the CSV at `path`, in file order. An error names the line and the column when a
// cell is not what its column holds, or when a column is missing.
absl::StatusOr<std::vector<PublishedRow>> ReadPublishedRows(const std::filesystem::path& path);

}  // namespace neuron::workloads
