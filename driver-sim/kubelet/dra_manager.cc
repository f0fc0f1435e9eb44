// The emulator's DRA manager (dra_manager.h), written from kubernetes/kubernetes
// pkg/kubelet/cm/dra/manager.go (prepareResources, unprepareResources) and claiminfo.go: the
// claim cache keyed by UID with the pods using each claim; per driver one NodePrepareResources
// for the claims not prepared yet; the answer checked claim by claim ("NodePrepareResources
// returned result for unknown claim UID %s", "NodePrepareResources failed for ResourceClaim %s:
// %s", "NodePrepareResources skipped %d ResourceClaims"), the same for unprepare; the kubelet's
// event text "prepare dynamic resources: ..." (kuberuntime) in front. The checkpoint is ours (JSON
// at KUBELET_DIR/dra_manager_state; the kubelet's is Go-specific) and, like the kubelet's, keeps
// every field of ClaimInfo but `prepared`. The pods' allocatedResourcesStatus is
// UpdateAllocatedResourcesStatus and buildResourceHealth of the same file; the health it reads is
// dra_health.h's.
#include "driver-sim/kubelet/dra_manager.h"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>

#include "core/base/file_io.h"
#include "driver-sim/kubelet/dra_health.h"
#include "driver-sim/kubelet/dra_plugins.h"
#include "nlohmann/json.hpp"

namespace neuron::sim {

namespace {

using nlohmann::json;

constexpr std::chrono::seconds kClientCallTimeout{45};  // defaultClientCallTimeout

// As the kubelet's ClaimInfoState: the devices under DriverState, by driver.
json ToJson(const ClaimInfo& c) {
  json drivers = json::object();
  for (const std::string& driver : c.ref.drivers) drivers[driver]["Devices"] = json::array();
  for (const PreparedDevice& d : c.devices) {
    drivers[d.driver]["Devices"].push_back({{"RequestNames", d.request_names},
                                            {"PoolName", d.pool},
                                            {"DeviceName", d.device},
                                            {"CDIDeviceIDs", d.cdi_ids}});
  }
  return {{"ClaimUID", c.ref.uid},
          {"ClaimName", c.ref.name},
          {"Namespace", c.ref.namespace_name},
          {"PodUIDs", c.pod_uids},
          {"DriverState", drivers}};
}

ClaimInfo FromJson(const json& j) {
  ClaimInfo c;
  c.ref = ClaimRef{j.at("Namespace").get<std::string>(),
                   j.at("ClaimName").get<std::string>(),
                   j.at("ClaimUID").get<std::string>(),
                   {}};
  c.pod_uids = j.at("PodUIDs").get<std::set<std::string>>();
  for (const auto& [driver, state] : j.at("DriverState").items()) {
    c.ref.drivers.push_back(driver);
    for (const json& d : state.at("Devices")) {
      c.devices.push_back(
          PreparedDevice{driver, d.at("RequestNames").get<std::vector<std::string>>(),
                         d.at("PoolName").get<std::string>(), d.at("DeviceName").get<std::string>(),
                         d.at("CDIDeviceIDs").get<std::vector<std::string>>()});
    }
  }
  return c;
}

absl::Status Wrap(std::string_view what, const absl::Status& s) {
  return absl::Status(s.code(), fmt::format("{}: {}", what, std::string{s.message()}));
}

}  // namespace

class DraManager::Impl {
 public:
  Impl(Options o, std::shared_ptr<spdlog::logger> log)
      : options_(std::move(o)),
        log_(std::move(log)),
        health_(options_.health_timeout),
        streams_(&health_, log_),
        store_(options_.registry_dir, options_.poll,
               options_.rpc_deadline.value_or(kClientCallTimeout), log_) {}

  absl::Status Start() {
    Stop();
    {
      std::lock_guard lock(mu_);
      if (absl::Status s = ReadLocked(); !s.ok()) {
        log_->error("DRA: starting without the claim cache: {}", std::string{s.message()});
        claims_.clear();
      }
    }
    store_.Start(
        [this](const std::string& driver) { PrepareRunning(driver); },
        [this](const std::string& driver) { streams_.Follow(driver, store_.Newest(driver)); });
    PrepareRunning("");
    return absl::OkStatus();
  }

  // The watcher first: it is what starts streams.
  void Stop() {
    store_.Stop();
    streams_.StopAll();
  }

  absl::Status Prepare(const std::string& pod, const std::vector<ClaimRef>& refs) {
    std::map<std::string, std::vector<ClaimRef>> batches;  // driver -> claims to prepare
    {
      std::lock_guard lock(mu_);
      for (const ClaimRef& ref : refs) {
        ClaimInfo& info = claims_[ref.uid];
        info.ref = ref;
        info.pod_uids.insert(pod);
        for (const std::string& driver : ref.drivers) {
          if (!info.prepared_by.contains(driver)) batches[driver].push_back(ref);
        }
      }
      WriteLocked();
    }
    for (const auto& [driver, claims] : batches) {
      if (absl::Status s = PrepareBatch(driver, claims); !s.ok()) {
        return Wrap("prepare dynamic resources", s);
      }
    }
    return absl::OkStatus();
  }

  absl::Status Unprepare(const std::string& pod, const std::vector<ClaimRef>& refs) {
    std::map<std::string, std::vector<ClaimRef>> batches;
    {
      std::lock_guard lock(mu_);
      for (const ClaimRef& ref : refs) {
        auto it = claims_.find(ref.uid);
        if (it == claims_.end()) continue;
        it->second.pod_uids.erase(pod);
        if (!it->second.pod_uids.empty()) continue;
        for (const std::string& driver : it->second.ref.drivers) batches[driver].push_back(ref);
      }
    }
    for (const auto& [driver, claims] : batches) {
      absl::Status s = UnprepareBatch(driver, claims);
      if (!s.ok()) {
        std::lock_guard lock(mu_);
        for (const ClaimRef& ref : refs) {
          if (auto it = claims_.find(ref.uid); it != claims_.end()) it->second.pod_uids.insert(pod);
        }
        return Wrap("unprepare dynamic resources", s);
      }
    }
    std::lock_guard lock(mu_);
    for (const auto& [driver, claims] : batches) {
      for (const ClaimRef& ref : claims) claims_.erase(ref.uid);
    }
    WriteLocked();
    return absl::OkStatus();
  }

  std::vector<ClaimInfo> Claims(const std::vector<ClaimRef>& refs) const {
    std::lock_guard lock(mu_);
    std::vector<ClaimInfo> out;
    for (const ClaimRef& ref : refs) {
      if (auto it = claims_.find(ref.uid); it != claims_.end()) out.push_back(it->second);
    }
    return out;
  }

  std::map<std::string, std::vector<std::string>> Plugins() const { return store_.Plugins(); }

  std::vector<ResourceStatus> AllocatedResourcesStatus(const std::vector<ClaimRef>& refs) const {
    const auto now = DraHealthCache::Clock::now();
    std::vector<ResourceStatus> out;
    for (const ClaimInfo& info : Claims(refs)) {
      ResourceStatus status{.name = "claim:" + info.ref.name, .resources = {}};
      std::set<std::string> seen;  // devices may share a CDI device ID
      for (const PreparedDevice& d : info.devices) {
        const DeviceHealth h = health_.Get(d.driver, d.pool, d.device, now);
        ResourceHealth r{
            .resource_id = d.cdi_ids.empty() ? fmt::format("{}/{}/{}", d.driver, d.pool, d.device)
                                             : d.cdi_ids.front(),
            .health = std::string(HealthName(h.health)),
            .message = h.message,
        };
        if (seen.insert(r.resource_id).second) status.resources.push_back(std::move(r));
      }
      if (!status.resources.empty()) out.push_back(std::move(status));
    }
    return out;
  }

 private:
  absl::Status PrepareBatch(const std::string& driver, const std::vector<ClaimRef>& claims) {
    absl::StatusOr<std::map<std::string, PrepareResult>> answer =
        store_.NodePrepare(driver, claims);
    if (!answer.ok()) return answer.status();
    std::lock_guard lock(mu_);
    for (const auto& entry : *answer) {
      const std::string& uid = entry.first;
      const PrepareResult& result = entry.second;
      auto ref = std::find_if(claims.begin(), claims.end(),
                              [&](const ClaimRef& c) { return c.uid == uid; });
      if (ref == claims.end()) {
        return absl::UnknownError(
            fmt::format("NodePrepareResources returned result for unknown claim UID {}", uid));
      }
      if (!result.error.empty()) {
        return absl::UnknownError(fmt::format(
            "NodePrepareResources failed for ResourceClaim {}: {}", ref->name, result.error));
      }
      // What the driver prepared replaces what it prepared before (a prepare again after a
      // restart); the other drivers' devices stay.
      ClaimInfo& info = claims_[uid];
      std::erase_if(info.devices, [&](const PreparedDevice& d) { return d.driver == driver; });
      for (PreparedDevice d : result.devices) {
        d.driver = driver;
        info.devices.push_back(std::move(d));
      }
      info.prepared_by.insert(driver);
    }
    WriteLocked();
    if (answer->size() < claims.size()) {
      return absl::UnknownError(fmt::format("NodePrepareResources skipped {} ResourceClaims",
                                            claims.size() - answer->size()));
    }
    return absl::OkStatus();
  }

  absl::Status UnprepareBatch(const std::string& driver, const std::vector<ClaimRef>& claims) {
    absl::StatusOr<std::map<std::string, std::string>> answer =
        store_.NodeUnprepare(driver, claims);
    if (!answer.ok()) return answer.status();
    std::lock_guard lock(mu_);
    for (const auto& entry : *answer) {
      const std::string& uid = entry.first;
      const std::string& error = entry.second;
      auto ref = std::find_if(claims.begin(), claims.end(),
                              [&](const ClaimRef& c) { return c.uid == uid; });
      if (ref == claims.end()) {
        return absl::UnknownError(
            fmt::format("NodeUnprepareResources returned result for unknown claim UID {}", uid));
      }
      if (!error.empty()) {
        return absl::UnknownError(fmt::format(
            "NodeUnprepareResources failed for ResourceClaim {}: {}", ref->name, error));
      }
      if (auto it = claims_.find(uid); it != claims_.end()) it->second.prepared_by.erase(driver);
    }
    if (answer->size() < claims.size()) {
      return absl::UnknownError(fmt::format("NodeUnprepareResources skipped {} ResourceClaims",
                                            claims.size() - answer->size()));
    }
    return absl::OkStatus();
  }

  // Claims that running pods use but that are not prepared (after a restart, or a driver that
  // came back): prepared again, per driver ("" = every driver). Errors are logged; the kubelet
  // retries on its next pod sync, we on the driver's next registration.
  void PrepareRunning(const std::string& only_driver) {
    std::map<std::string, std::vector<ClaimRef>> batches;
    {
      std::lock_guard lock(mu_);
      for (const auto& [uid, info] : claims_) {
        if (info.pod_uids.empty()) continue;
        for (const std::string& driver : info.ref.drivers) {
          if (info.prepared_by.contains(driver)) continue;
          if (only_driver.empty() || driver == only_driver) batches[driver].push_back(info.ref);
        }
      }
    }
    for (const auto& [driver, claims] : batches) {
      if (absl::Status s = PrepareBatch(driver, claims); !s.ok()) {
        log_->error("DRA: preparing {} claims of running pods again: {}", driver,
                    std::string{s.message()});
      }
    }
  }

  void WriteLocked() {
    json list = json::array();
    for (const auto& [uid, info] : claims_) list.push_back(ToJson(info));
    const std::string text = json{{"ClaimInfoStateList", list}}.dump() + "\n";
    if (absl::Status s = ReplaceFile(options_.state_file, text); !s.ok()) {
      log_->error("DRA: {}", std::string{s.message()});
    }
  }

  absl::Status ReadLocked() {
    claims_.clear();
    std::ifstream in(options_.state_file);
    if (!in) return absl::OkStatus();  // a new node
    std::stringstream text;
    text << in.rdbuf();
    const json doc = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.is_object()) {
      return absl::DataLossError(fmt::format("{} is corrupted", options_.state_file.string()));
    }
    try {
      for (const json& j : doc.at("ClaimInfoStateList")) {
        ClaimInfo info = FromJson(j);
        claims_[info.ref.uid] = std::move(info);
      }
    } catch (const json::exception& e) {
      claims_.clear();
      return absl::DataLossError(
          fmt::format("{} is corrupted: {}", options_.state_file.string(), e.what()));
    }
    return absl::OkStatus();
  }

  const Options options_;
  std::shared_ptr<spdlog::logger> log_;
  mutable std::mutex mu_;
  std::map<std::string, ClaimInfo> claims_;  // guarded by mu_; by claim UID
  DraHealthCache health_;
  DraHealthStreams streams_;  // reports into health_
  DraPluginStore store_;      // last: its watcher calls back into us
};

DraManager::DraManager(Options options, std::shared_ptr<spdlog::logger> log)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(log))) {}
DraManager::~DraManager() { impl_->Stop(); }
absl::Status DraManager::Start() { return impl_->Start(); }
void DraManager::Stop() { impl_->Stop(); }
absl::Status DraManager::Prepare(const std::string& pod_uid, const std::vector<ClaimRef>& claims) {
  return impl_->Prepare(pod_uid, claims);
}
absl::Status DraManager::Unprepare(const std::string& pod_uid,
                                   const std::vector<ClaimRef>& claims) {
  return impl_->Unprepare(pod_uid, claims);
}
std::vector<ClaimInfo> DraManager::Claims(const std::vector<ClaimRef>& claims) const {
  return impl_->Claims(claims);
}
std::map<std::string, std::vector<std::string>> DraManager::Plugins() const {
  return impl_->Plugins();
}
std::vector<ResourceStatus> DraManager::AllocatedResourcesStatus(
    const std::vector<ClaimRef>& claims) const {
  return impl_->AllocatedResourcesStatus(claims);
}

}  // namespace neuron::sim
