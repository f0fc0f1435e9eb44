// Fuzz target: a process's datastore as the agent maps it (docs/driver-interface.md#datastore; D13,
// D15 in driver-sim/README.md#deviations). Random bytes would only ever fail the size check, so the
// input is a patch list over a valid datastore written by driver-sim's writer: byte 0 picks a
// truncation, then (u32 offset, u8 length, bytes) records overwrite the image. The runtime writes
// its slot without locks while the agent reads it, so every byte of a mapped slot is outside input
// to the parser, whatever the driver guarantees about its size.
//
// Properties, each against a reference written here from the documented layout
// (docs/driver-interface.md#datastore-layout for the driver's part, driver-sim/README.md#datastores
// for the simulator's object area and extensions), with its own offsets as literal numbers and
// plain memcpy reads, never the parser's offset helpers (core/driver/datastore_layout.h): a wrong
// offset there would otherwise agree with itself.
//   - The whole datastore parses exactly when the reference accepts it (262144 bytes, "nds\0"),
//     else fails with DATA_LOSS naming the source.
//   - Every counter it returns (format version, 31 device counters, 95 counters of each of the 16
//     core slots, histogram bounds and counts) equals the bytes at its documented offset.
//   - A record (object area, models, histogram) is present exactly when the reference accepts it,
//     with the documented fields; each one the reference rejects costs one warning naming the
//     source, and nothing else does.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "core/sample/datastore.h"
#include "driver-sim/driver/datastore_writer.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

// The documented layout, spelled here on purpose (see above).
constexpr size_t kSize = 262144;
constexpr size_t kDeviceCounters = 8;       // 31 x u64
constexpr size_t kCoreOriginal = 256;       // cores 0-3: 256 + c*248, NC index 0-30
constexpr size_t kCoreExtended = 55936;     // cores 0-3: 55936 + c*512, entry k = index 31+k
constexpr size_t kCoreFullSets = 57984;     // cores 4-15: 57984 + (c-4)*768, entry k = index k
constexpr size_t kObjectHeader = 1248;      // "simo", u32 version 1
constexpr size_t kProcessInfo = 1256;       // 60 bytes
constexpr size_t kProcessTag = 1316;        // char[256]
constexpr size_t kModelCount = 1572;        // u32
constexpr size_t kModels = 1580;            // 668 bytes each, at most 64
constexpr size_t kHistogram = 67200;        // "hist", u32 buckets used (1..24)
constexpr size_t kHistogramBounds = 67208;  // 24 x u64
constexpr size_t kHistogramCounts = 67400;  // per core c, bucket b: 67400 + (c*24 + b)*8

std::vector<std::byte>* g_template = nullptr;

template <typename T>
T At(const std::vector<std::byte>& image, size_t offset) {
  T v;
  std::memcpy(&v, image.data() + offset, sizeof(T));
  return v;
}

bool Magic(const std::vector<std::byte>& image, size_t offset, const char (&m)[5]) {
  return std::memcmp(image.data() + offset, m, 4) == 0;
}

// NC index `i` of core slot `c`, by docs/driver-interface.md#datastore-layout's three sections.
uint64_t CoreCounter(const std::vector<std::byte>& image, int c, int i) {
  if (c < 4) {
    return i < 31
               ? At<uint64_t>(image, kCoreOriginal + static_cast<size_t>(c * 248 + i * 8))
               : At<uint64_t>(image, kCoreExtended + static_cast<size_t>(c * 512 + (i - 31) * 8));
  }
  return At<uint64_t>(image, kCoreFullSets + static_cast<size_t>((c - 4) * 768 + i * 8));
}

// A char[max] up to its first NUL, unprintable bytes shown as '?' (tags become metric labels).
std::string Text(const std::vector<std::byte>& image, size_t offset, size_t max) {
  std::string s;
  for (size_t i = 0; i < max; ++i) {
    const char ch = static_cast<char>(image[offset + i]);
    if (ch == '\0') break;
    s.push_back(ch >= 0x20 && ch <= 0x7e ? ch : '?');
  }
  return s;
}

bool SameVersion(const neuron::NdsVersion& v, const std::vector<std::byte>& image, size_t at) {
  return v.major == At<uint8_t>(image, at) && v.minor == At<uint8_t>(image, at + 1) &&
         v.build == At<uint32_t>(image, at + 4);
}

// The counters: every one the record holds, against its documented offset.
void CheckCounters(const neuron::DatastoreRecord& r, const std::vector<std::byte>& image) {
  FUZZ_CHECK(r.format_version == At<int32_t>(image, 4));
  FUZZ_CHECK(r.device_counters.size() == 31);
  for (size_t i = 0; i < 31; ++i) {
    FUZZ_CHECK(r.device_counters[i] == At<uint64_t>(image, kDeviceCounters + i * 8));
  }
  FUZZ_CHECK(r.core_counters.size() == 16 && r.core_counters[0].size() == 95);
  for (int c = 0; c < 16; ++c) {
    for (int i = 0; i < 95; ++i) FUZZ_CHECK(r.Core(c, i) == CoreCounter(image, c, i));
  }
}

// The object area; returns the warnings the reference expects from it.
int CheckObjectArea(const neuron::DatastoreRecord& r, const std::vector<std::byte>& image) {
  const bool ours = Magic(image, kObjectHeader, "simo");
  const bool understood = ours && At<uint32_t>(image, kObjectHeader + 4) == 1;
  FUZZ_CHECK(r.process.has_value() == understood);
  if (!understood) {
    FUZZ_CHECK(r.models.empty());
    return ours ? 1 : 0;
  }
  FUZZ_CHECK(r.process->framework_type == At<int8_t>(image, kProcessInfo));
  FUZZ_CHECK(r.process->tag == Text(image, kProcessInfo + 1, 32));
  FUZZ_CHECK(SameVersion(r.process->framework_version, image, kProcessInfo + 36));
  FUZZ_CHECK(SameVersion(r.process->fal_version, image, kProcessInfo + 44));
  FUZZ_CHECK(SameVersion(r.process->runtime_version, image, kProcessInfo + 52));
  FUZZ_CHECK(r.process->long_tag == Text(image, kProcessTag, 256));
  const uint32_t count = At<uint32_t>(image, kModelCount);
  if (count > 64) {
    FUZZ_CHECK(r.models.empty());
    return 1;
  }
  FUZZ_CHECK(r.models.size() == count);
  for (size_t m = 0; m < count; ++m) {
    const size_t at = kModels + m * 668;
    const neuron::DatastoreModel& got = r.models[m];
    FUZZ_CHECK(got.model_id == At<uint32_t>(image, at));
    FUZZ_CHECK(got.model_node_id == At<uint32_t>(image, at + 4));
    FUZZ_CHECK(got.name == Text(image, at + 8, 256));
    FUZZ_CHECK(std::memcmp(got.uuid.data(), image.data() + at + 264, 16) == 0);
    FUZZ_CHECK(got.nc_index == At<uint8_t>(image, at + 280));
    FUZZ_CHECK(got.sg_index == At<uint8_t>(image, at + 281));
    for (size_t loc = 0; loc < 2; ++loc) {
      for (size_t slot = 0; slot < 12; ++slot) {
        const size_t e = at + 284 + (loc * 12 + slot) * 16;
        FUZZ_CHECK(got.memory[loc][slot].total_size == At<uint64_t>(image, e));
        FUZZ_CHECK(got.memory[loc][slot].chunk_count == At<uint32_t>(image, e + 8));
      }
    }
  }
  return 0;
}

// The D13 histogram; returns the warnings the reference expects from it.
int CheckHistogram(const neuron::DatastoreRecord& r, const std::vector<std::byte>& image) {
  if (!Magic(image, kHistogram, "hist")) {
    FUZZ_CHECK(!r.histogram.has_value());
    return 0;
  }
  const uint32_t n = At<uint32_t>(image, kHistogram + 4);
  bool valid = n >= 1 && n <= 24;
  // Bounds ascend strictly and end in +Inf (UINT64_MAX).
  for (uint32_t b = 1; valid && b < n; ++b) {
    valid = At<uint64_t>(image, kHistogramBounds + (b - 1) * size_t{8}) <
            At<uint64_t>(image, kHistogramBounds + b * size_t{8});
  }
  valid = valid && At<uint64_t>(image, kHistogramBounds + (n - 1) * size_t{8}) == UINT64_MAX;
  FUZZ_CHECK(r.histogram.has_value() == valid);
  if (!valid) return 1;
  FUZZ_CHECK(r.histogram->num_buckets == static_cast<int>(n));
  for (uint32_t b = 0; b < 24; ++b) {
    const bool used = b < n;
    FUZZ_CHECK(r.histogram->bounds_us[b] ==
               (used ? At<uint64_t>(image, kHistogramBounds + b * size_t{8}) : 0));
    for (size_t c = 0; c < 16; ++c) {
      FUZZ_CHECK(r.histogram->counts[c][b] ==
                 (used ? At<uint64_t>(image, kHistogramCounts + (c * 24 + b) * 8) : 0));
    }
  }
  return 0;
}

// A datastore with every part the reader decodes: counters, process info and tag, models,
// the latency histogram and the EFA traffic extension.
std::vector<std::byte> MakeTemplate() {
  std::vector<uint8_t> memory(kSize);
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
  const bool accepted = image.size() == kSize && Magic(image, 0, "nds\0");
  FUZZ_CHECK(record.ok() == accepted);
  if (!record.ok()) {
    FUZZ_CHECK(record.status().code() == absl::StatusCode::kDataLoss);
    FUZZ_CHECK(std::string{record.status().message()}.starts_with("fuzz: "));
    FUZZ_CHECK(warnings.empty());
    return 0;
  }
  FUZZ_CHECK(record->device == 3 && record->pid == 4242 && record->source == "fuzz");
  CheckCounters(*record, image);
  const int expected_warnings = CheckObjectArea(*record, image) + CheckHistogram(*record, image);
  FUZZ_CHECK(warnings.size() == static_cast<size_t>(expected_warnings));
  for (const std::string& w : warnings) FUZZ_CHECK(w.starts_with("fuzz: "));
  (void)record->Tag();
  return 0;
}
