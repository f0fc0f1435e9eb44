#pragma once
// The kernel log's NEURON_HW_ERR= records that name a device (nd-id), counted per device and
// error type (docs/architecture.md#health, docs/metrics.md#health-metrics). The exporter's
// "since start" counts: the consumer decides where counting starts (Open's StartAt) and keeps
// the totals and the log's source state.
//
// Thread-safety: none; one owner (the exporter's background thread).

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/events/events.h"
#include "core/events/kmsg.h"

namespace neuron {

// device -> error type -> records
using HwErrorTally = std::map<int, std::map<std::string, uint64_t>>;

class HwErrorCounts {
 public:
  explicit HwErrorCounts(std::filesystem::path kmsg) : path_(std::move(kmsg)) {}

  // (Re)opens the log: kEnd when records already in it are history, kBeginning for a log that
  // appeared after counting started. The error says why the log cannot be read.
  absl::Status Open(KmsgReader::StartAt start);
  bool is_open() const { return reader_ != nullptr; }
  // Adds the records that arrived since the last call to `tally` (Open first) and, when
  // `evidence` is given, appends them to it as events, in the log's order, with the driver's
  // device reset records among them (the exporter's health evidence applies them: a reset
  // clears what came before it, not what came after). Records without nd-id are left out: no
  // device to count them against. Fails when the log cannot be read.
  absl::Status Read(HwErrorTally* tally, std::vector<Event>* evidence = nullptr);
  // The driver's open and close records (IsOpenCloseRecord) Read has passed so far.
  uint64_t open_close_records() const { return open_close_records_; }

 private:
  const std::filesystem::path path_;
  std::unique_ptr<KmsgReader> reader_;
  uint64_t open_close_records_ = 0;
};

}  // namespace neuron
