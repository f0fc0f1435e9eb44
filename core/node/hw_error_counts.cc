#include "core/node/hw_error_counts.h"

#include <optional>

namespace neuron {

absl::Status HwErrorCounts::Open(KmsgReader::StartAt start) {
  absl::StatusOr<std::unique_ptr<KmsgReader>> r = KmsgReader::Open(path_, start);
  if (!r.ok()) return r.status();
  reader_ = *std::move(r);
  return absl::OkStatus();
}

absl::Status HwErrorCounts::Read(HwErrorTally* tally) {
  if (reader_ == nullptr) return absl::FailedPreconditionError("the kernel log is not open");
  return reader_->ReadAvailable(
      [tally](const KmsgRecord& rec) {
        std::optional<HwErrorRecord> hw = ParseHwError(rec.text);
        if (hw && hw->nd_id) ++(*tally)[*hw->nd_id][hw->type];
      },
      {});
}

}  // namespace neuron
