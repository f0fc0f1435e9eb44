#include "driver-sim/model/published_rows.h"

#include <fmt/format.h>

#include <charconv>

// Debian's fast-cpp-csv-parser: quoted cells, a header read by name, errors that name the line.
// Its reading thread would buy nothing on a 269-line file. Its error type copies the file name
// with strncpy into a fixed buffer on purpose (truncated names), which GCC's inliner flags.
#define CSV_IO_NO_THREAD
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-truncation"
#include <libfccp/csv.h>
#pragma GCC diagnostic pop

namespace neuron::workloads {
namespace {

// The columns read, in the order of ReadRow's arguments; the file has others (notes, derived
// fields, ...) for its readers.
constexpr int kColumns = 25;

using Reader = io::CSVReader<kColumns, io::trim_chars<>, io::double_quote_escape<',', '"'>>;

// A whole number that may not have been published (an empty cell is 0).
absl::Status ParseCount(const std::string& cell, const char* column, int line, int* out) {
  *out = 0;
  if (cell.empty()) return absl::OkStatus();
  const auto [end, error] = std::from_chars(cell.data(), cell.data() + cell.size(), *out);
  if (error == std::errc() && end == cell.data() + cell.size()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      fmt::format("line {}: column {} is \"{}\", not a whole number", line, column, cell));
}

absl::StatusOr<PublishedRow> ReadRow(Reader& in, bool* done) {
  PublishedRow r;
  std::string nodes, tp, pp, dp, seq, mb, gb, line;
  *done =
      !in.read_row(r.model, r.instance, nodes, tp, pp, dp, seq, mb, gb, r.precision, r.optimizer,
                   r.zero1, r.sequence_parallel, r.activation_checkpointing, r.flash_attention,
                   r.figure, r.unit, r.sdk_release, r.framework, r.source_file, r.source_commit,
                   line, r.excluded_by, r.model_key, r.source_kind);
  if (*done) return r;
  r.csv_line = static_cast<int>(in.get_file_line());
  struct Count {
    const std::string& cell;
    const char* column;
    int* out;
  };
  const Count counts[] = {{nodes, "nodes", &r.nodes},
                          {tp, "tp", &r.tp},
                          {pp, "pp", &r.pp},
                          {dp, "dp", &r.dp},
                          {seq, "seq_len", &r.seq},
                          {mb, "micro_batch", &r.micro_batch},
                          {gb, "global_batch", &r.global_batch},
                          {line, "source_line", &r.source_line}};
  for (const Count& c : counts) {
    if (absl::Status s = ParseCount(c.cell, c.column, r.csv_line, c.out); !s.ok()) return s;
  }
  return r;
}

}  // namespace

absl::StatusOr<std::vector<PublishedRow>> ReadPublishedRows(const std::filesystem::path& path) {
  std::vector<PublishedRow> rows;
  try {
    Reader in(path.string());
    in.read_header(io::ignore_extra_column, "model", "instance", "nodes", "tp", "pp", "dp",
                   "seq_len", "micro_batch", "global_batch", "precision", "optimizer", "zero1",
                   "sequence_parallel", "activation_checkpointing", "flash_attention", "figure",
                   "unit", "sdk_release", "framework", "source_file", "source_commit",
                   "source_line", "excluded_by", "model_key", "source_kind");
    for (;;) {
      bool done = false;
      absl::StatusOr<PublishedRow> r = ReadRow(in, &done);
      if (!r.ok()) {
        return absl::InvalidArgumentError(
            fmt::format("{}: {}", path.string(), std::string{r.status().message()}));
      }
      if (done) break;
      rows.push_back(*std::move(r));
    }
  } catch (const io::error::base& e) {
    // The library's message names the file, the line and the column.
    return absl::InvalidArgumentError(e.what());
  }
  return rows;
}

}  // namespace neuron::workloads
