#include "core/node/hw_error_counts.h"

#include <optional>

namespace neuron {

absl::Status HwErrorCounts::Open(KmsgReader::StartAt start) {
  absl::StatusOr<std::unique_ptr<KmsgReader>> r = KmsgReader::Open(path_, start);
  if (!r.ok()) return r.status();
  reader_ = *std::move(r);
  return absl::OkStatus();
}

absl::Status HwErrorCounts::Read(HwErrorTally* tally, std::vector<Event>* evidence) {
  if (reader_ == nullptr) return absl::FailedPreconditionError("the kernel log is not open");
  return reader_->ReadAvailable(
      [this, tally, evidence](const KmsgRecord& rec) {
        if (IsOpenCloseRecord(rec.text)) {
          ++open_close_records_;
          return;
        }
        Event e;
        if (std::optional<ResetRecord> reset = ParseResetRecord(rec.text)) {
          if (evidence == nullptr) return;
          e.kind = EventKind::kDeviceReset;
          e.device = reset->device;
          e.reset = reset->step;
          evidence->push_back(std::move(e));
          return;
        }
        std::optional<HwErrorRecord> hw = ParseHwError(rec.text);
        if (!hw || !hw->nd_id) return;
        ++(*tally)[*hw->nd_id][hw->type];
        if (evidence == nullptr) return;
        e.kind = EventKind::kHardwareError;
        e.device = *hw->nd_id;
        e.hw_error = *std::move(hw);
        evidence->push_back(std::move(e));
      },
      {});
}

}  // namespace neuron
