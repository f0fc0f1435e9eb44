// Fuzz target: a process's datastore as the agent maps it (docs/driver-interface.md#datastore; D15
// in driver-sim/README.md#deviations) and as libnrt-sim's nds_* functions read the records in its
// object area (driver-sim/runtime/records.h). Random bytes would only ever fail the size check, so
// the input is a patch list over a valid datastore written by driver-sim's writer: byte 0 picks a
// truncation, then (u32 offset, u8 length, bytes) records overwrite the image. The runtime writes
// its slot without locks while the agent reads it, so every byte of a mapped slot is outside input
// to the parser, whatever the driver guarantees about its size.
//
// Properties, each against a reference written here from the documented layout
// (docs/driver-interface.md#datastore-layout for the driver's part, driver-sim/README.md's
// "libnrt-sim" for libnrt-sim's records), with its own offsets as literal numbers and plain
// memcpy reads, never the readers' offset helpers: a wrong offset there would otherwise agree with
// itself.
//   - The whole datastore parses exactly when the reference accepts it (262144 bytes, "nds\0"),
//     else fails with DATA_LOSS naming the source.
//   - Every counter it returns (format version, 31 device counters, 95 counters of each of the 16
//     core slots) equals the bytes at its documented offset, whatever the rest holds.
//   - libnrt-sim's record reader accepts the object area exactly when the reference does (never
//     written, or "nrts" version 1 with at most 64 models and no write in progress), returns the
//     documented fields with their strings terminated, and refuses anything else as an unknown
//     format.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "core/sample/datastore.h"
#include "driver-sim/driver/datastore_writer.h"
#include "driver-sim/runtime/records.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

// The documented layout, spelled here on purpose (see above).
constexpr size_t kSize = 262144;
constexpr size_t kDeviceCounters = 8;    // 31 x u64
constexpr size_t kCoreOriginal = 256;    // cores 0-3: 256 + c*248, NC index 0-30
constexpr size_t kCoreExtended = 55936;  // cores 0-3: 55936 + c*512, entry k = index 31+k
constexpr size_t kCoreFullSets = 57984;  // cores 4-15: 57984 + (c-4)*768, entry k = index k
// libnrt-sim's records (driver-sim/README.md, "libnrt-sim"), from the object area at 1248.
constexpr size_t kObjectArea = 1248;
constexpr size_t kObjectAreaSize = 44588 - 1248;
constexpr size_t kRecordsSeq = 1248 + 8;     // u32, odd while the runtime writes
constexpr size_t kRecordsCount = 1248 + 12;  // u32 model nodes
constexpr size_t kProcessInfo = 1248 + 16;   // 60 bytes
constexpr size_t kProcessTag = 1248 + 76;    // char[256]
constexpr size_t kModels = 1248 + 332;       // 668 bytes each, at most 64

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

// A char[max] as libnrt-sim hands it over: the bytes up to the first NUL, the last always NUL.
std::string CString(const std::vector<std::byte>& image, size_t offset, size_t max) {
  std::string s(reinterpret_cast<const char*>(image.data() + offset), max - 1);
  return s.substr(0, s.find('\0'));
}

// libnrt-sim's records against the reference.
void CheckRecords(const std::vector<std::byte>& image) {
  using neuron::nrt::records::ReadResult;
  const std::span<const uint8_t> area(reinterpret_cast<const uint8_t*>(image.data()) + kObjectArea,
                                      kObjectAreaSize);
  nds_process_info_t info;
  nds_process_info_ext_t ext;
  std::vector<neuron::nrt::records::ModelNode> models;
  const ReadResult pi = neuron::nrt::records::ReadProcessInfo(area, &info, &ext);
  const ReadResult mr = neuron::nrt::records::ReadModels(area, &models);
  if (At<uint32_t>(image, kObjectArea) == 0) {  // never written: empty records
    FUZZ_CHECK(pi == ReadResult::kOk && mr == ReadResult::kOk && models.empty());
    FUZZ_CHECK(info.tag[0] == '\0' && ext.tag[0] == '\0');
    return;
  }
  const bool ours = Magic(image, kObjectArea, "nrts") && At<uint32_t>(image, kObjectArea + 4) == 1;
  if (!ours) {
    FUZZ_CHECK(pi == ReadResult::kUnknownFormat && mr == ReadResult::kUnknownFormat);
    return;
  }
  if ((At<uint32_t>(image, kRecordsSeq) & 1u) != 0) {  // a write that never ends
    FUZZ_CHECK(pi == ReadResult::kBusy && mr == ReadResult::kBusy);
    return;
  }
  FUZZ_CHECK(pi == ReadResult::kOk);
  FUZZ_CHECK(info.framework_type == At<int8_t>(image, kProcessInfo));
  FUZZ_CHECK(std::string(info.tag) == CString(image, kProcessInfo + 1, 32));
  FUZZ_CHECK(info.runtime_version.major == At<uint8_t>(image, kProcessInfo + 52));
  FUZZ_CHECK(info.runtime_version.build == At<uint32_t>(image, kProcessInfo + 56));
  FUZZ_CHECK(std::string(ext.tag) == CString(image, kProcessTag, 256));
  const uint32_t count = At<uint32_t>(image, kRecordsCount);
  if (count > 64) {
    FUZZ_CHECK(mr == ReadResult::kUnknownFormat);
    return;
  }
  FUZZ_CHECK(mr == ReadResult::kOk && models.size() == count);
  for (size_t m = 0; m < models.size(); ++m) {
    const size_t at = kModels + m * 668;
    FUZZ_CHECK(models[m].info.model_id == At<uint32_t>(image, at));
    FUZZ_CHECK(models[m].info.model_node_id == At<uint32_t>(image, at + 4));
    FUZZ_CHECK(std::string(models[m].info.name) == CString(image, at + 8, 256));
    FUZZ_CHECK(models[m].info.nc_index == At<uint8_t>(image, at + 280));
    FUZZ_CHECK(models[m].memory.model_mem_usage[1][11].total_size ==
               At<uint64_t>(image, at + 284 + 23 * 16));
  }
}

// A datastore with every part the readers decode: counters, libnrt-sim's process info, tag and
// models, and the EFA traffic extension.
std::vector<std::byte> MakeTemplate() {
  std::vector<uint8_t> memory(kSize);
  auto writer = neuron::sim::DatastoreWriter::OverMemory(memory, 3, 4242);
  for (int core = 0; core < 2; ++core) {
    for (int i = 0; i < 40; ++i) (void)writer->SetCoreCounter(core, i, 1000 * core + i);
  }
  (void)writer->SetDeviceCounter(1, 77);
  neuron::nrt::records::Writer records(writer->ObjectArea());
  nds_process_info_t info{};
  info.framework_type = 1;
  std::strcpy(info.tag, "train.py");
  info.runtime_version = {2, 21, 7};
  records.SetProcessInfo(info);
  records.SetProcessInfoExt("llama2-7b-worker-0");
  for (uint32_t m = 0; m < 3; ++m) {
    neuron::nrt::records::ModelNode node{};
    node.info.model_id = 10 + m;
    node.info.model_node_id = m;
    std::strcpy(node.info.name, "model.neff");
    node.memory.model_mem_usage[0][1].total_size = 1 << 20;
    (void)records.AddModel(node);
  }
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
  auto record = neuron::ParseDatastore(image, 3, 4242, "fuzz");
  const bool accepted = image.size() == kSize && Magic(image, 0, "nds\0");
  FUZZ_CHECK(record.ok() == accepted);
  if (!record.ok()) {
    FUZZ_CHECK(record.status().code() == absl::StatusCode::kDataLoss);
    FUZZ_CHECK(std::string{record.status().message()}.starts_with("fuzz: "));
    return 0;
  }
  FUZZ_CHECK(record->device == 3 && record->pid == 4242 && record->source == "fuzz");
  CheckCounters(*record, image);
  CheckRecords(image);
  return 0;
}
