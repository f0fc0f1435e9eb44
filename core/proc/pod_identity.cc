#include "core/proc/pod_identity.h"

#include <algorithm>
#include <cctype>

namespace neuron {
namespace {

bool IsHex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

// 8-4-4-4-12 hex digits; the systemd driver writes '_' where the UID has '-'.
std::optional<std::string> NormalizeUid(std::string_view text) {
  if (text.size() != 36) return std::nullopt;
  std::string uid(text);
  for (size_t i = 0; i < uid.size(); ++i) {
    const bool dash_position = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash_position) {
      if (uid[i] != '-' && uid[i] != '_') return std::nullopt;
      uid[i] = '-';
    } else if (!IsHex(uid[i])) {
      return std::nullopt;
    } else {
      uid[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(uid[i])));
    }
  }
  return uid;
}

std::vector<std::string_view> Segments(std::string_view path) {
  std::vector<std::string_view> out;
  while (!path.empty()) {
    const size_t slash = path.find('/');
    const std::string_view seg = path.substr(0, slash);
    if (!seg.empty()) out.push_back(seg);
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return out;
}

// "cri-containerd-<id>.scope", "docker-<id>.scope", "crio-<id>.scope" or a bare id.
std::optional<std::string> ContainerId(std::string_view seg) {
  if (seg.ends_with(".scope")) seg.remove_suffix(6);
  const size_t dash = seg.rfind('-');
  if (dash != std::string_view::npos) seg.remove_prefix(dash + 1);
  if (seg.size() < 12 || !std::all_of(seg.begin(), seg.end(), IsHex)) return std::nullopt;
  return std::string(seg);
}

std::optional<PodIdentity> FromPath(std::string_view path) {
  if (path.find("kubepods") == std::string_view::npos) return std::nullopt;
  const std::vector<std::string_view> segs = Segments(path);
  for (size_t i = 0; i < segs.size(); ++i) {
    std::string_view seg = segs[i];
    // systemd: kubepods-burstable-pod<uid>.slice or kubepods-pod<uid>.slice
    if (seg.ends_with(".slice")) seg.remove_suffix(6);
    const size_t at = seg.rfind("pod");
    if (at == std::string_view::npos) continue;
    std::optional<std::string> uid = NormalizeUid(seg.substr(at + 3));
    if (!uid) continue;
    PodIdentity id;
    id.uid = *uid;
    id.qos = "guaranteed";
    for (size_t j = 0; j <= i; ++j) {
      if (segs[j].find("burstable") != std::string_view::npos) id.qos = "burstable";
      if (segs[j].find("besteffort") != std::string_view::npos) id.qos = "besteffort";
    }
    if (i + 1 < segs.size()) id.container_id = ContainerId(segs[i + 1]);
    return id;
  }
  return std::nullopt;
}

class CgroupPodLocator : public PodLocator {
 public:
  explicit CgroupPodLocator(ProcReader proc) : proc_(std::move(proc)) {}

  absl::StatusOr<std::optional<PodIdentity>> Locate(const ProcessRef& process) override {
    absl::StatusOr<std::string> text = proc_.Cgroup(process.pid);
    if (!text.ok()) return text.status();
    return ParsePodFromCgroup(*text);
  }
  std::string_view name() const override { return "cgroup"; }

 private:
  ProcReader proc_;
};

void FillMissing(PodIdentity* into, const PodIdentity& from) {
  if (!into->uid.empty() && !from.uid.empty() && into->uid != from.uid) return;  // another pod
  if (into->uid.empty()) into->uid = from.uid;
  if (!into->name) into->name = from.name;
  if (!into->namespace_name) into->namespace_name = from.namespace_name;
  if (!into->container) into->container = from.container;
  if (!into->container_id) into->container_id = from.container_id;
  if (!into->qos) into->qos = from.qos;
}

class ChainedPodLocator : public PodLocator {
 public:
  explicit ChainedPodLocator(std::vector<std::unique_ptr<PodLocator>> chain)
      : chain_(std::move(chain)) {}

  absl::StatusOr<std::optional<PodIdentity>> Locate(const ProcessRef& process) override {
    std::optional<PodIdentity> found;
    absl::Status first_error = absl::OkStatus();
    bool any_answer = false;
    for (const std::unique_ptr<PodLocator>& l : chain_) {
      absl::StatusOr<std::optional<PodIdentity>> r = l->Locate(process);
      if (!r.ok()) {
        if (first_error.ok()) first_error = r.status();
        continue;
      }
      any_answer = true;
      if (!r->has_value()) continue;
      if (!found) {
        found = **r;
      } else {
        FillMissing(&*found, **r);
      }
    }
    if (!any_answer && !first_error.ok()) return first_error;
    return found;
  }
  std::string_view name() const override { return "chained"; }

 private:
  std::vector<std::unique_ptr<PodLocator>> chain_;
};

}  // namespace

std::optional<PodIdentity> ParsePodFromCgroup(std::string_view text) {
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    // "hierarchy-ID:controllers:path"; the path may itself hold ':'.
    const size_t first = line.find(':');
    if (first == std::string_view::npos) continue;
    const size_t second = line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    if (std::optional<PodIdentity> id = FromPath(line.substr(second + 1))) return id;
  }
  return std::nullopt;
}

std::unique_ptr<PodLocator> MakeCgroupPodLocator(ProcReader proc) {
  return std::make_unique<CgroupPodLocator>(std::move(proc));
}

std::unique_ptr<PodLocator> MakeChainedPodLocator(std::vector<std::unique_ptr<PodLocator>> chain) {
  return std::make_unique<ChainedPodLocator>(std::move(chain));
}

}  // namespace neuron
