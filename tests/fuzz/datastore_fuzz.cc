// Fuzz target: a process's datastore as the agent maps it (docs/driver-interface.md#datastore; D13,
// D15 in driver-sim/README.md#deviations). Random bytes would only ever fail the size check, so the
// input is a patch list over a valid datastore written by driver-sim's writer: byte 0 picks a
// truncation, then (u32 offset, u8 length, bytes) records overwrite the image. Any patched image
// must parse or fail cleanly. The runtime writes its slot without locks while the agent reads it,
// so every byte of a mapped slot is outside input to the parser, whatever the driver guarantees
// about its size.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "core/driver/datastore_layout.h"
#include "core/sample/datastore.h"
#include "driver-sim/driver/datastore_writer.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

std::vector<std::byte>* g_template = nullptr;

// A datastore with every part the reader decodes: counters, process info and tag, models,
// the latency histogram and the EFA traffic extension.
std::vector<std::byte> MakeTemplate() {
  std::vector<uint8_t> memory(neuron::nds::kSize);
  auto writer = neuron::sim::DatastoreWriter::OverMemory(memory, 3, 4242);
  for (int core = 0; core < 2; ++core) {
    for (int i = 0; i < 40; ++i) (void)writer->SetCoreCounter(core, i, 1000 * core + i);
  }
  (void)writer->SetDeviceCounter(1, 77);
  writer->SetProcessInfo("train.py", {.major = 2, .minor = 21, .build = 7}, 1);
  writer->SetProcessTag("llama2-7b-worker-0");
  for (uint32_t m = 0; m < 3; ++m) {
    neuron::sim::NdsModel model{.model_id = 10 + m, .model_node_id = m, .name = "model.neff"};
    model.memory[0][1].total_size = 1 << 20;
    (void)writer->AddModel(model);
  }
  (void)writer->InitHistogram(neuron::sim::kDefaultLatencyBoundsMicros);
  writer->ObserveLatency(0, 1500);
  (void)writer->InitEfaTraffic(4);
  writer->AddEfaTraffic(1, 0, 12345);
  writer.reset();
  const std::span<const std::byte> bytes = std::as_bytes(std::span(memory));
  return {bytes.begin(), bytes.end()};
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_template = new std::vector<std::byte>(MakeTemplate());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::byte> image = *g_template;
  if (size > 0) {
    // 0: whole; otherwise cut somewhere: whatever a back end hands over, only a whole slot parses.
    if (data[0] % 8 == 1) image.resize((size_t{data[0]} << 10) % image.size());
    size_t at = 1;
    while (at + 5 <= size) {
      uint32_t offset = 0;
      std::memcpy(&offset, data + at, 4);
      const size_t len = std::min<size_t>(data[at + 4], size - at - 5);
      at += 5;
      if (!image.empty()) {
        offset %= image.size();
        const size_t n = std::min(len, image.size() - offset);
        std::memcpy(image.data() + offset, data + at, n);
      }
      at += len;
    }
  }
  std::vector<std::string> warnings;
  auto record = neuron::ParseDatastore(image, 3, 4242, "fuzz", &warnings);
  if (record.ok()) {
    FUZZ_CHECK(record->device == 3);
    FUZZ_CHECK(record->models.size() <= static_cast<size_t>(neuron::nds::kMaxModelRecords));
    (void)record->Tag();
  }
  return 0;
}
