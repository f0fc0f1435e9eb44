#include "plugin/dra/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/base/unique_fd.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace neuron::plugin::dra {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr int kVersion = 1;
constexpr std::string_view kStarted = "PrepareStarted";
constexpr std::string_view kCompleted = "PrepareCompleted";
// A checkpoint of 128 devices' claims is a few tens of KiB; anything far larger is not ours.
constexpr std::streamsize kMaxCheckpointBytes = 4 << 20;

std::string Fnv1a64(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return fmt::format("{:016x}", h);
}

json ToJson(const PreparedClaims& claims) {
  json out = json::object();
  for (const auto& [uid, c] : claims) {
    json devices = json::array();
    for (const PreparedDevice& d : c.devices) {
      json device = {
          {"requests", d.requests}, {"pool", d.pool}, {"device", d.device}, {"cdiIds", d.cdi_ids}};
      if (d.admin_access) device["adminAccess"] = true;
      devices.push_back(std::move(device));
    }
    out[uid] = {{"namespace", c.namespace_},
                {"name", c.name},
                {"devices", devices},
                {"state", c.state == PrepareState::kStarted ? kStarted : kCompleted}};
  }
  return out;
}

PreparedClaims FromJson(const json& j) {  // throws json::exception on a bad shape
  PreparedClaims out;
  for (const auto& [uid, c] : j.items()) {
    PreparedClaim claim;
    claim.namespace_ = c.at("namespace").get<std::string>();
    claim.name = c.at("name").get<std::string>();
    for (const json& d : c.at("devices")) {
      claim.devices.push_back({d.at("requests").get<std::vector<std::string>>(),
                               d.at("pool").get<std::string>(), d.at("device").get<std::string>(),
                               d.at("cdiIds").get<std::vector<std::string>>(),
                               d.value("adminAccess", false)});
    }
    claim.state = c.value("state", std::string(kCompleted)) == kStarted ? PrepareState::kStarted
                                                                        : PrepareState::kCompleted;
    out[uid] = std::move(claim);
  }
  return out;
}

}  // namespace

absl::Status WriteFileAtomic(const fs::path& path, std::string_view content, int mode,
                             bool durable) {
  const fs::path tmp = path.string() + ".tmp";
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode));
  if (!fd.valid()) {
    return absl::InternalError(
        fmt::format("cannot write {}: {}", tmp.string(), std::strerror(errno)));
  }
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd.get(), content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::unlink(tmp.c_str());
      return absl::InternalError(fmt::format("cannot write {}: {}", tmp.string(), why));
    }
    done += static_cast<size_t>(n);
  }
  if ((durable && ::fsync(fd.get()) != 0) || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return absl::InternalError(fmt::format("cannot replace {}: {}", path.string(), why));
  }
  return absl::OkStatus();
}

absl::Status SaveCheckpoint(const fs::path& path, const Checkpoint& checkpoint) {
  const json body = ToJson(checkpoint.claims);
  json doc = {{"version", kVersion}, {"claims", body}, {"checksum", Fnv1a64(body.dump())}};
  if (!checkpoint.boot_id.empty()) doc["bootId"] = checkpoint.boot_id;
  return WriteFileAtomic(path, doc.dump(1) + "\n", 0600, /*durable=*/false);
}

std::string CurrentBootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

absl::StatusOr<Checkpoint> LoadCheckpoint(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(fmt::format("no checkpoint at {}", path.string()));
  std::string text(static_cast<size_t>(kMaxCheckpointBytes) + 1, '\0');
  in.read(text.data(), kMaxCheckpointBytes + 1);
  text.resize(static_cast<size_t>(in.gcount()));
  if (static_cast<std::streamsize>(text.size()) > kMaxCheckpointBytes) {
    return absl::DataLossError(fmt::format("checkpoint {} is too large", path.string()));
  }
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("claims") ||
      !doc.contains("checksum") || !doc["checksum"].is_string()) {
    return absl::DataLossError(fmt::format("checkpoint {} does not parse", path.string()));
  }
  if (doc.value("version", 0) != kVersion) {
    return absl::DataLossError(fmt::format("checkpoint {} has version {}, not {}", path.string(),
                                           doc.value("version", 0), kVersion));
  }
  const std::string want = doc["checksum"].get<std::string>();
  const std::string got = Fnv1a64(doc["claims"].dump());
  if (want != got) {
    return absl::DataLossError(fmt::format(
        "checkpoint {} fails its checksum ({} recorded, {} computed)", path.string(), want, got));
  }
  try {
    Checkpoint out;
    out.claims = FromJson(doc["claims"]);
    if (doc.contains("bootId") && doc["bootId"].is_string()) out.boot_id = doc["bootId"];
    return out;
  } catch (const json::exception& e) {
    return absl::DataLossError(fmt::format("checkpoint {}: {}", path.string(), e.what()));
  }
}

}  // namespace neuron::plugin::dra
