#include "driver-sim/runtime/records.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>

namespace neuron::nrt::records {
namespace {

// Area-relative offsets of the format (driver-sim/README.md, "libnrt-sim").
constexpr size_t kVersionAt = 4;
constexpr size_t kSeqAt = 8;
constexpr size_t kCountAt = 12;
constexpr size_t kInfoAt = 16;
constexpr size_t kExtAt = kInfoAt + sizeof(nds_process_info_t);
constexpr size_t kModelsAt = kExtAt + sizeof(nds_process_info_ext_t);
constexpr size_t kModelInfoSize = sizeof(nds_model_node_info_t);
constexpr size_t kModelSize = kModelInfoSize + sizeof(nds_model_node_mem_usage_info_t);
static_assert(sizeof(nds_process_info_t) == 60 && sizeof(nds_model_node_info_t) == 284 &&
              sizeof(nds_model_node_mem_usage_info_t) == 384);
static_assert(kModelsAt + kMaxModelNodes * kModelSize <= kAreaSize);

// A reader gives up after this many copies that a write overlapped; a write is one memcpy of at
// most a model node, so this only happens when the writer is descheduled mid-write for long.
constexpr int kReadAttempts = 1000;

uint32_t* Word(uint8_t* base, size_t at) { return reinterpret_cast<uint32_t*>(base + at); }
uint32_t Load(const uint8_t* base, size_t at, int order) {
  return __atomic_load_n(reinterpret_cast<const uint32_t*>(base + at), order);
}

// What a read returns without reading on: kOk (empty records) for an area never written,
// kUnknownFormat for another magic or version; nullopt for this format.
std::optional<ReadResult> Settled(const uint8_t* base) {
  uint32_t magic = 0;
  std::memcpy(&magic, base, 4);
  if (magic == 0) return ReadResult::kOk;
  if (std::memcmp(base, kMagic, 4) != 0 || Load(base, kVersionAt, __ATOMIC_RELAXED) != kVersion) {
    return ReadResult::kUnknownFormat;
  }
  return std::nullopt;
}

// Runs `copy` until it ran while no write was in progress (seqlock read side).
template <typename Copy>
ReadResult Consistent(const uint8_t* base, Copy copy) {
  for (int attempt = 0; attempt < kReadAttempts; ++attempt) {
    const uint32_t before = Load(base, kSeqAt, __ATOMIC_ACQUIRE);
    if ((before & 1u) == 0) {
      copy();
      __atomic_thread_fence(__ATOMIC_ACQUIRE);
      if (Load(base, kSeqAt, __ATOMIC_RELAXED) == before) return ReadResult::kOk;
    }
    sched_yield();
  }
  return ReadResult::kBusy;
}

}  // namespace

Writer::Writer(std::span<uint8_t> area, uint32_t version) : base_(area.data()) {
  std::memset(base_, 0, kModelsAt);
  std::memcpy(base_ + kVersionAt, &version, 4);
  // The magic last: a reader that sees it sees the version.
  uint32_t magic = 0;
  std::memcpy(&magic, kMagic, 4);
  __atomic_store_n(Word(base_, 0), magic, __ATOMIC_RELEASE);
}

void Writer::Begin() {
  __atomic_store_n(Word(base_, kSeqAt), Load(base_, kSeqAt, __ATOMIC_RELAXED) + 1,
                   __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
}

void Writer::End() {
  __atomic_store_n(Word(base_, kSeqAt), Load(base_, kSeqAt, __ATOMIC_RELAXED) + 1,
                   __ATOMIC_RELEASE);
}

void Writer::SetProcessInfo(const nds_process_info_t& info) {
  Begin();
  std::memcpy(base_ + kInfoAt, &info, sizeof(info));
  End();
}

void Writer::SetProcessInfoExt(std::string_view tag) {
  nds_process_info_ext_t ext{};
  std::memcpy(ext.tag, tag.data(), std::min(tag.size(), sizeof(ext.tag) - 1));
  Begin();
  std::memcpy(base_ + kExtAt, &ext, sizeof(ext));
  End();
}

int Writer::ModelCount() const { return static_cast<int>(Load(base_, kCountAt, __ATOMIC_RELAXED)); }

bool Writer::AddModel(const ModelNode& node) {
  const int n = ModelCount();
  if (n >= kMaxModelNodes) return false;
  uint8_t* at = base_ + kModelsAt + static_cast<size_t>(n) * kModelSize;
  Begin();
  std::memcpy(at, &node.info, kModelInfoSize);
  std::memcpy(at + kModelInfoSize, &node.memory, sizeof(node.memory));
  __atomic_store_n(Word(base_, kCountAt), static_cast<uint32_t>(n + 1), __ATOMIC_RELAXED);
  End();
  return true;
}

bool Writer::RemoveModel(uint32_t model_id, uint32_t model_node_id) {
  const int n = ModelCount();
  for (int i = 0; i < n; ++i) {
    uint8_t* at = base_ + kModelsAt + static_cast<size_t>(i) * kModelSize;
    nds_model_node_info_t info;
    std::memcpy(&info, at, sizeof(info));
    if (info.model_id != model_id || info.model_node_id != model_node_id) continue;
    uint8_t* last = base_ + kModelsAt + static_cast<size_t>(n - 1) * kModelSize;
    Begin();
    if (at != last) std::memcpy(at, last, kModelSize);
    std::memset(last, 0, kModelSize);
    __atomic_store_n(Word(base_, kCountAt), static_cast<uint32_t>(n - 1), __ATOMIC_RELAXED);
    End();
    return true;
  }
  return false;
}

ReadResult ReadProcessInfo(std::span<const uint8_t> area, nds_process_info_t* info,
                           nds_process_info_ext_t* ext) {
  const uint8_t* base = area.data();
  *info = {};
  *ext = {};
  if (const std::optional<ReadResult> done = Settled(base)) return *done;
  ReadResult r = Consistent(base, [&] {
    std::memcpy(info, base + kInfoAt, sizeof(*info));
    std::memcpy(ext, base + kExtAt, sizeof(*ext));
  });
  // The writer bounds its strings; a reader must not trust that.
  info->tag[sizeof(info->tag) - 1] = '\0';
  ext->tag[sizeof(ext->tag) - 1] = '\0';
  return r;
}

ReadResult ReadModels(std::span<const uint8_t> area, std::vector<ModelNode>* models) {
  const uint8_t* base = area.data();
  models->clear();
  if (const std::optional<ReadResult> done = Settled(base)) return *done;
  bool bad_count = false;
  const ReadResult r = Consistent(base, [&] {
    const uint32_t n = Load(base, kCountAt, __ATOMIC_RELAXED);
    bad_count = n > static_cast<uint32_t>(kMaxModelNodes);
    models->assign(bad_count ? 0 : n, ModelNode{});
    for (uint32_t i = 0; i < models->size(); ++i) {
      const uint8_t* at = base + kModelsAt + static_cast<size_t>(i) * kModelSize;
      std::memcpy(&(*models)[i].info, at, kModelInfoSize);
      std::memcpy(&(*models)[i].memory, at + kModelInfoSize,
                  sizeof(nds_model_node_mem_usage_info_t));
      (*models)[i].info.name[sizeof((*models)[i].info.name) - 1] = '\0';
    }
  });
  if (r == ReadResult::kOk && bad_count) return ReadResult::kUnknownFormat;
  return r;
}

std::string TagOf(std::span<const uint8_t> area) {
  nds_process_info_t info;
  nds_process_info_ext_t ext;
  if (ReadProcessInfo(area, &info, &ext) != ReadResult::kOk) return "";
  return ext.tag[0] != '\0' ? std::string(ext.tag) : std::string(info.tag);
}

}  // namespace neuron::nrt::records
