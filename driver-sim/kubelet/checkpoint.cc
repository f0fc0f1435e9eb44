// device-plugins/kubelet_internal_checkpoint, shaped like the kubelet's (DM
// checkpoint/checkpoint.go v2): {"Data": {"PodDeviceEntries": [...], "RegisteredDevices": {...}},
// "Checksum": N}, plus our "NeuronSimPods" (pod names and container order, which the kubelet gets
// from the API server).
//
// Checksum: the kubelet's is FNV-32a over Go's printing of Data, which C++ cannot reproduce; ours
// is FNV-1a 32-bit over the compact JSON dump of Data (keys sorted), checked on read.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/escaping.h"
#include "core/base/file_io.h"
#include "driver-sim/kubelet/emulator_impl.h"
#include "nlohmann/json.hpp"

namespace neuron::sim {

namespace {

using nlohmann::json;

uint32_t Fnv1a32(const std::string& s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) {
    h ^= c;
    h *= 16777619u;
  }
  return h;
}

}  // namespace

absl::Status KubeletEmulator::Impl::WriteCheckpointLocked() {
  json entries = json::array();
  json sim_pods = json::array();
  for (const PodRecord& pod : pods) {
    json containers = json::array();
    for (const ContainerRecord& c : pod.containers) {
      containers.push_back({{"Name", c.name},
                            {"Init", c.init},
                            {"CDIDeviceIDs", c.cdi_ids},
                            {"CDIEdits", CdiEditsJson(c.cdi)}});
      for (const auto& [resource, ids] : c.ids) {
        // DeviceIDs per NUMA node, -1 for devices without topology (DM pod_devices.go).
        json per_numa = json::object();
        for (const std::string& id : ids) {
          std::vector<int64_t> numa = NumaNodesOf(resources, resource, id);
          if (numa.empty()) numa.push_back(-1);
          for (int64_t n : numa) per_numa[std::to_string(n)].push_back(id);
        }
        std::string resp;
        if (auto r = c.responses.find(resource); r != c.responses.end()) {
          r->second.SerializeToString(&resp);
        }
        entries.push_back({{"PodUID", pod.uid},
                           {"ContainerName", c.name},
                           {"ResourceName", resource},
                           {"DeviceIDs", per_numa},
                           {"AllocResp", absl::Base64Escape(resp)}});
      }
    }
    json claims = json::array();
    for (const ClaimRef& c : pod.claims) {
      claims.push_back({{"Namespace", c.namespace_name},
                        {"Name", c.name},
                        {"UID", c.uid},
                        {"Drivers", c.drivers}});
    }
    sim_pods.push_back({{"PodUID", pod.uid},
                        {"Namespace", pod.namespace_name},
                        {"Name", pod.name},
                        {"Containers", containers},
                        {"Claims", claims}});
  }
  // RegisteredDevices holds the healthy devices of every known resource, as writeCheckpoint does.
  json registered = json::object();
  for (const auto& [resource, ep] : resources) {
    json ids = json::array();
    for (const auto& [id, dev] : ep.devices) {
      if (dev.healthy) ids.push_back(id);
    }
    registered[resource] = ids;
  }
  json data = {{"PodDeviceEntries", entries}, {"RegisteredDevices", registered}};
  json doc = {{"Data", data}, {"Checksum", Fnv1a32(data.dump())}, {"NeuronSimPods", sim_pods}};

  return ReplaceFile(checkpoint_file, doc.dump() + "\n");
}

absl::Status KubeletEmulator::Impl::ReadCheckpointLocked() {
  // What survives a restart: registered resources come back as stopped endpoints with no devices
  // (capacity 0 until their plugin re-registers, DM readCheckpoint), pods keep their devices.
  resources.clear();
  pods.clear();
  std::ifstream in(checkpoint_file);
  if (!in) return absl::OkStatus();  // a new node
  std::stringstream text;
  text << in.rdbuf();
  json doc = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("Data")) {
    return absl::DataLossError(fmt::format("checkpoint {} is corrupted", checkpoint_file.string()));
  }
  const json& data = doc["Data"];
  if (!doc.contains("Checksum") || doc["Checksum"] != Fnv1a32(data.dump())) {
    return absl::DataLossError(
        fmt::format("checkpoint {} is corrupted (checksum mismatch)", checkpoint_file.string()));
  }
  try {
    const SteadyTime now = std::chrono::steady_clock::now();
    for (const auto& [resource, ids] : data.at("RegisteredDevices").items()) {
      Endpoint& ep = resources[resource];
      ep.stop_time = now;
    }
    std::map<std::string, PodRecord*> by_uid;
    if (doc.contains("NeuronSimPods")) {
      for (const json& p : doc["NeuronSimPods"]) {
        PodRecord pod;
        pod.uid = p.at("PodUID").get<std::string>();
        pod.namespace_name = p.at("Namespace").get<std::string>();
        pod.name = p.at("Name").get<std::string>();
        for (const json& c : p.at("Containers")) {
          ContainerRecord rec;
          rec.name = c.at("Name").get<std::string>();
          rec.init = c.at("Init").get<bool>();
          rec.cdi_ids = c.value("CDIDeviceIDs", std::vector<std::string>());
          AppendCdiEdits(c.value("CDIEdits", json::object()), rec.cdi);
          pod.containers.push_back(std::move(rec));
        }
        for (const json& c : p.value("Claims", json::array())) {
          // "Driver": a checkpoint of before claims had drivers beside neuron.aws.com.
          pod.claims.push_back(ClaimRef{
              c.at("Namespace").get<std::string>(), c.at("Name").get<std::string>(),
              c.at("UID").get<std::string>(),
              c.contains("Drivers") ? c.at("Drivers").get<std::vector<std::string>>()
                                    : std::vector<std::string>{c.at("Driver").get<std::string>()}});
        }
        pods.push_back(std::move(pod));
      }
    }
    for (PodRecord& pod : pods) by_uid[pod.uid] = &pod;
    for (const json& e : data.at("PodDeviceEntries")) {
      auto pod_it = by_uid.find(e.at("PodUID").get<std::string>());
      if (pod_it == by_uid.end()) continue;  // not ours to name: the API server would know it
      const std::string container = e.at("ContainerName").get<std::string>();
      const std::string resource = e.at("ResourceName").get<std::string>();
      for (ContainerRecord& c : pod_it->second->containers) {
        if (c.name != container) continue;
        std::vector<std::string>& ids = c.ids[resource];
        std::set<std::string> seen;
        for (const auto& [numa, list] : e.at("DeviceIDs").items()) {
          for (const json& id : list) {
            if (seen.insert(id.get<std::string>()).second) ids.push_back(id.get<std::string>());
          }
        }
        std::string raw;
        if (absl::Base64Unescape(e.value("AllocResp", std::string()), &raw)) {
          c.responses[resource].ParseFromString(raw);
        }
      }
    }
  } catch (const json::exception& ex) {
    resources.clear();
    pods.clear();
    return absl::DataLossError(
        fmt::format("checkpoint {} is corrupted: {}", checkpoint_file.string(), ex.what()));
  }
  return absl::OkStatus();
}

}  // namespace neuron::sim
