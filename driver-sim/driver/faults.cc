#include "driver-sim/driver/faults.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <nlohmann/json.hpp>
#include <system_error>
#include <utility>

#include "core/base/file_io.h"
#include "driver-sim/driver/sim_paths.h"
#include "driver-sim/driver/sim_tree.h"

namespace neuron::sim {
namespace {

constexpr int kFormatVersion = 1;

constexpr std::array<std::pair<FaultKind, std::string_view>, 7> kKindNames{{
    {FaultKind::kHbmUe, "hbm-ue"},
    {FaultKind::kSramUe, "sram-ue"},
    {FaultKind::kNan, "nan"},
    {FaultKind::kDmaAbort, "dma-abort"},
    {FaultKind::kHang, "hang"},
    {FaultKind::kLinkDown, "link-down"},
    {FaultKind::kSdc, "sdc"},
}};

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Reads an optional non-negative int field; false if present with the wrong type or range.
bool OptionalIndex(const nlohmann::json& obj, const char* key, std::optional<int>* out) {
  if (!obj.contains(key) || obj[key].is_null()) return true;
  if (!obj[key].is_number_integer()) return false;
  const int64_t v = obj[key].get<int64_t>();
  if (v < 0 || v > 1 << 20) return false;
  *out = static_cast<int>(v);
  return true;
}

}  // namespace

std::string_view FaultKindName(FaultKind kind) {
  for (const auto& [k, name] : kKindNames) {
    if (k == kind) return name;
  }
  return "unknown";
}

std::optional<FaultKind> ParseFaultKind(std::string_view name) {
  for (const auto& [k, n] : kKindNames) {
    if (n == name) return k;
  }
  return std::nullopt;
}

const std::vector<FaultKind>& InjectKinds() {
  static const std::vector<FaultKind> kinds{FaultKind::kHbmUe, FaultKind::kSramUe,
                                            FaultKind::kNan,   FaultKind::kDmaAbort,
                                            FaultKind::kHang,  FaultKind::kSdc};
  return kinds;
}

std::filesystem::path FaultsPath(const RootPaths& paths) {
  return sim::SimRunDir(paths) / "faults.json";
}

std::string FaultsToJson(const std::vector<PendingFault>& faults) {
  // Ordered, so the file reads id, kind, device, ... for people too.
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const PendingFault& f : faults) {
    nlohmann::ordered_json entry = {
        {"id", f.id}, {"kind", std::string(FaultKindName(f.kind))}, {"device", f.device}};
    if (f.core) entry["core"] = *f.core;
    if (f.peer) entry["peer"] = *f.peer;
    entry["time_ms"] = f.time_ms;
    list.push_back(std::move(entry));
  }
  const nlohmann::ordered_json doc = {{"version", kFormatVersion}, {"faults", std::move(list)}};
  return doc.dump(2) + "\n";
}

absl::StatusOr<std::vector<PendingFault>> ParseFaults(std::string_view json,
                                                      std::string_view source) {
  const nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& what) {
    return absl::DataLossError(fmt::format("{}: {}", source, what));
  };
  if (doc.is_discarded() || !doc.is_object()) return bad("not a JSON object");
  if (!doc.contains("version") || !doc["version"].is_number_integer()) {
    return bad("missing integer field version");
  }
  if (doc["version"].get<int64_t>() != kFormatVersion) {
    return bad(fmt::format("unsupported version {} (this build reads {})",
                           doc["version"].get<int64_t>(), kFormatVersion));
  }
  if (!doc.contains("faults") || !doc["faults"].is_array()) return bad("missing array faults");
  std::vector<PendingFault> out;
  for (size_t i = 0; i < doc["faults"].size(); ++i) {
    const nlohmann::json& e = doc["faults"][i];
    auto bad_entry = [&](std::string_view what) {
      return bad(fmt::format("faults[{}]: {}", i, what));
    };
    if (!e.is_object()) return bad_entry("not an object");
    PendingFault f;
    if (!e.contains("id") || !e["id"].is_number_unsigned()) return bad_entry("missing id");
    f.id = e["id"].get<uint64_t>();
    if (!e.contains("kind") || !e["kind"].is_string()) return bad_entry("missing kind");
    const std::optional<FaultKind> kind = ParseFaultKind(e["kind"].get<std::string>());
    if (!kind) return bad_entry(fmt::format("unknown kind '{}'", e["kind"].get<std::string>()));
    f.kind = *kind;
    std::optional<int> device;
    if (!OptionalIndex(e, "device", &device) || !device) return bad_entry("missing device");
    f.device = *device;
    if (!OptionalIndex(e, "core", &f.core)) return bad_entry("bad core");
    if (!OptionalIndex(e, "peer", &f.peer)) return bad_entry("bad peer");
    if (f.kind == FaultKind::kLinkDown && !f.peer) return bad_entry("link-down without peer");
    if (e.contains("time_ms")) {
      if (!e["time_ms"].is_number_integer()) return bad_entry("bad time_ms");
      f.time_ms = e["time_ms"].get<int64_t>();
    }
    out.push_back(f);
  }
  return out;
}

absl::StatusOr<std::vector<PendingFault>> ReadFaults(const RootPaths& paths) {
  const std::filesystem::path path = FaultsPath(paths);
  absl::StatusOr<std::string> text = ReadAttribute(path);
  if (!text.ok()) return text.status();
  return ParseFaults(*text, path.string());
}

std::string DescribeFault(const PendingFault& f) {
  if (f.kind == FaultKind::kLinkDown) {
    return fmt::format("#{} link-down between devices {} and {}", f.id, f.device,
                       f.peer.value_or(-1));
  }
  if (f.core) {
    return fmt::format("#{} {} on device {} core {}", f.id, FaultKindName(f.kind), f.device,
                       *f.core);
  }
  return fmt::format("#{} {} on device {} (any core)", f.id, FaultKindName(f.kind), f.device);
}

PendingFault FaultBook::Add(FaultKind kind, int device, std::optional<int> core,
                            std::optional<int> peer) {
  PendingFault f{next_id_++, kind, device, core, peer, NowMs()};
  faults_.push_back(f);
  return f;
}

bool FaultBook::Remove(uint64_t id) {
  const auto it =
      std::find_if(faults_.begin(), faults_.end(), [id](const auto& f) { return f.id == id; });
  if (it == faults_.end()) return false;
  faults_.erase(it);
  return true;
}

int FaultBook::ClearDevice(int device) {
  return static_cast<int>(std::erase_if(faults_, [device](const PendingFault& f) {
    return f.device == device && f.kind != FaultKind::kLinkDown;
  }));
}

absl::Status FaultBook::Write() const {
  return WriteFileAtomic(FaultsPath(paths_), FaultsToJson(faults_));
}

absl::Status FaultBook::RemoveFile() const {
  std::error_code ec;
  std::filesystem::remove(FaultsPath(paths_), ec);
  if (ec) {
    return absl::InternalError(
        fmt::format("remove {}: {}", FaultsPath(paths_).string(), ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace neuron::sim
