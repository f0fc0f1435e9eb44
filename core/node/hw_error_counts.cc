#include "core/node/hw_error_counts.h"

#include <optional>

namespace neuron {

absl::Status HwErrorCounts::Open(KmsgReader::StartAt start) {
  absl::StatusOr<std::unique_ptr<KmsgReader>> r = KmsgReader::Open(path_, start);
  if (!r.ok()) return r.status();
  reader_ = *std::move(r);
  return absl::OkStatus();
}

absl::Status HwErrorCounts::Read(HwErrorTally* tally, std::vector<HwErrorRecord>* records) {
  if (reader_ == nullptr) return absl::FailedPreconditionError("the kernel log is not open");
  return reader_->ReadAvailable(
      [tally, records](const KmsgRecord& rec) {
        std::optional<HwErrorRecord> hw = ParseHwError(rec.text);
        if (!hw || !hw->nd_id) return;
        ++(*tally)[*hw->nd_id][hw->type];
        if (records != nullptr) records->push_back(*std::move(hw));
      },
      {});
}

}  // namespace neuron
