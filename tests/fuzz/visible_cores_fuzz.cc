// Fuzz target: NEURON_RT_VISIBLE_CORES (docs/runtime.md#environment), which users type by hand and
// the plugin writes. What parses must format back to text that parses to the same cores.
#include <cstdint>
#include <string_view>

#include "core/model/visible_cores.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto cores = neuron::ParseCoreList(text); cores.ok()) {
    FUZZ_CHECK(!cores->empty());
    auto again = neuron::ParseCoreList(neuron::FormatCoreList(*cores));
    FUZZ_CHECK(again.ok());
    // FormatCoreList keeps the order given, compressing only increasing runs.
    FUZZ_CHECK(*again == *cores);
  }
  if (auto range = neuron::ParseVisibleCores(text); range.ok()) {
    FUZZ_CHECK(range->count > 0 && range->first >= 0);
    FUZZ_CHECK(neuron::CheckCoreRange(*range, range->last() + 1).ok());
    FUZZ_CHECK(*neuron::ParseVisibleCores(neuron::FormatVisibleCores(*range)) == *range);
  }
  return 0;
}
