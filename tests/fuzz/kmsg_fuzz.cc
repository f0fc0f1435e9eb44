// Fuzz target: kernel log records as /dev/kmsg returns them (one record per read) and the
// NEURON_HW_ERR= lines inside them (docs/driver-interface.md#efa).
#include <cstdint>
#include <string_view>

#include "core/events/kmsg.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto record = neuron::ParseKmsgRecord(text); record.ok()) {
    FUZZ_CHECK(record->level >= 0 && record->level <= 7);
    if (auto err = neuron::ParseHwError(record->text)) FUZZ_CHECK(!err->type.empty());
  }
  if (auto err = neuron::ParseHwError(text)) {
    FUZZ_CHECK(!err->type.empty());
    FUZZ_CHECK(text.find(neuron::kHwErrToken) != std::string_view::npos);
  }
  return 0;
}
