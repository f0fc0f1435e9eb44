// The active check's manifest of reference programs and its baseline of execution times
// (top/health_check_internal.h).
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <system_error>

#include "core/base/file_io.h"
#include "top/health_check_internal.h"

namespace neuron::top::check {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

absl::Status BadManifest(const fs::path& file, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("{}: {}", file.string(), what));
}

// {"tensor": "file", ...} resolved under `dir`; every file must exist.
absl::StatusOr<std::vector<std::pair<std::string, fs::path>>> ManifestFiles(
    const json& obj, const fs::path& dir, const fs::path& manifest, const std::string& where) {
  if (!obj.is_object() || obj.empty()) {
    return BadManifest(manifest, where + ": expected {tensor: file}");
  }
  std::vector<std::pair<std::string, fs::path>> out;
  for (const auto& [name, file] : obj.items()) {
    if (!file.is_string()) {
      return BadManifest(manifest, fmt::format("{}.{}: expected a file", where, name));
    }
    const fs::path path = dir / file.get<std::string>();
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
      return BadManifest(manifest,
                         fmt::format("{}.{}: {} does not exist", where, name, path.string()));
    }
    out.emplace_back(name, path);
  }
  return out;
}

absl::StatusOr<RefProgram> ParseProgram(const json& p, const fs::path& dir, const fs::path& file,
                                        size_t i) {
  const std::string where = fmt::format("programs[{}]", i);
  if (!p.is_object() || !p.value("name", json()).is_string() ||
      !p.value("neff", json()).is_string() || !p.value("kind", json()).is_string()) {
    return BadManifest(file, where + ": needs name, kind and neff strings");
  }
  RefProgram r;
  r.name = p["name"].get<std::string>();
  const std::string kind = p["kind"].get<std::string>();
  if (kind != "compute" && kind != "exchange") {
    return BadManifest(file, where + ".kind: expected compute or exchange");
  }
  r.exchange = kind == "exchange";
  r.neff = dir / p["neff"].get<std::string>();
  std::error_code ec;
  if (!fs::is_regular_file(r.neff, ec)) {
    return BadManifest(file, fmt::format("{}.neff: {} does not exist", where, r.neff.string()));
  }
  const json inputs = p.value("inputs", json());
  if (!inputs.is_array() || inputs.size() != (r.exchange ? 2u : 1u)) {
    return BadManifest(file,
                       where + ".inputs: one {tensor: file} per rank (compute 1, exchange 2)");
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    auto rank = ManifestFiles(inputs[k], dir, file, fmt::format("{}.inputs[{}]", where, k));
    if (!rank.ok()) return rank.status();
    r.inputs.push_back(*std::move(rank));
  }
  auto expected = ManifestFiles(p.value("expected", json()), dir, file, where + ".expected");
  if (!expected.ok()) return expected.status();
  r.expected = *std::move(expected);
  return r;
}

}  // namespace

const RefProgram* Manifest::Find(std::string_view name) const {
  for (const RefProgram& p : programs) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

const RefProgram* Manifest::FirstOf(bool exchange) const {
  for (const RefProgram& p : programs) {
    if (p.exchange == exchange) return &p;
  }
  return nullptr;
}

absl::StatusOr<Manifest> LoadManifest(const fs::path& dir) {
  const fs::path file = dir / "manifest.json";
  absl::StatusOr<std::string> text = ReadWholeFile(file, 1 << 20);
  if (!text.ok()) return text.status();
  const json doc = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return BadManifest(file, "not a JSON object");
  if (doc.value("version", 0) != 1) return BadManifest(file, "version: expected 1");
  const json list = doc.value("programs", json());
  if (!list.is_array()) return BadManifest(file, "programs: expected an array");
  Manifest m;
  for (size_t i = 0; i < list.size(); ++i) {
    absl::StatusOr<RefProgram> p = ParseProgram(list[i], dir, file, i);
    if (!p.ok()) return p.status();
    m.programs.push_back(*std::move(p));
  }
  if (m.FirstOf(false) == nullptr) return BadManifest(file, "no program of kind compute");
  return m;
}

fs::path BaselinePath(const fs::path& state_dir) {
  return state_dir / "health-check" / "baseline.json";
}

absl::StatusOr<Baseline> LoadBaseline(const fs::path& path) {
  absl::StatusOr<std::string> text = ReadWholeFile(path, 1 << 20);
  if (!text.ok()) return text.status();
  const json doc = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || doc.value("version", 0) != 1) {
    return BadManifest(path, "not a baseline (version 1)");
  }
  Baseline b;
  const json factor = doc.value("slow_factor", json(b.factor));
  const json margin = doc.value("slow_margin_us", json(b.margin_us));
  const json programs = doc.value("execute_us", json::object());
  if (!factor.is_number() || factor.get<double>() < 1 || !margin.is_number_integer() ||
      margin.get<int64_t>() < 0 || !programs.is_object()) {
    return BadManifest(path, "slow_factor (>= 1), slow_margin_us (>= 0) or execute_us malformed");
  }
  b.factor = factor.get<double>();
  b.margin_us = margin.get<int64_t>();
  for (const auto& [name, us] : programs.items()) {
    if (!us.is_number() || us.get<double>() < 0) return BadManifest(path, "execute_us." + name);
    b.execute_us[name] = static_cast<int64_t>(us.get<double>());
  }
  return b;
}

absl::Status SaveBaseline(const fs::path& path, const Baseline& b) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) {
    return absl::UnavailableError(
        fmt::format("cannot create {}: {}", path.parent_path().string(), ec.message()));
  }
  nlohmann::ordered_json doc = {{"version", 1},
                                {"slow_factor", b.factor},
                                {"slow_margin_us", b.margin_us},
                                {"execute_us", b.execute_us}};
  // Written aside and renamed, so a reader never sees half a baseline.
  return ReplaceFile(path, doc.dump(2) + "\n");
}

bool IsSlow(const Baseline& b, const std::string& program, int64_t execute_us) {
  const auto it = b.execute_us.find(program);
  if (it == b.execute_us.end()) return false;
  return static_cast<double>(execute_us) > b.factor * static_cast<double>(it->second) &&
         execute_us - it->second > b.margin_us;
}

}  // namespace neuron::top::check
