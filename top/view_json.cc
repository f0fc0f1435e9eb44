// ViewToJson: neuron-top --snapshot (docs/tools-ux.md#requirements Q10): base units, null for
// absent.

#include <chrono>
#include <nlohmann/json.hpp>

#include "top/view_model.h"

namespace neuron::top {
namespace {

using Json = nlohmann::ordered_json;

template <typename T>
Json Opt(const std::optional<T>& v) {
  return v ? Json(*v) : Json();
}

Json Cpu(const CpuUsage& c) {
  Json j;
  j["user_ratio"] = Opt(c.user);
  j["system_ratio"] = Opt(c.system);
  return j;
}

Json Categories(const CategoryBytes& cats) {
  Json j = Json::object();
  for (int c = 0; c < kDeviceCategoryCount; ++c) {
    j[std::string(kDeviceCategoryKeys[c])] = Opt(cats[c]);
  }
  return j;
}

Json Pod(const ProcessRow& p) {
  if (!p.pod) return Json();
  Json j;
  j["uid"] = p.pod->uid.empty() ? Json() : Json(p.pod->uid);
  j["name"] = Opt(p.pod->name);
  j["namespace"] = Opt(p.pod->namespace_name);
  j["container"] = Opt(p.pod->container);
  j["container_id"] = Opt(p.pod->container_id);
  j["qos"] = Opt(p.pod->qos);
  return j;
}

Json MemoryTree(const std::vector<DeviceMemoryNode>& tree) {
  Json out = Json::array();
  for (const DeviceMemoryNode& n : tree) {
    Json d;
    d["neuron_device"] = n.index;
    d["device_memory_bytes"] = Opt(n.device_bytes);
    d["host_memory_bytes"] = Opt(n.host_bytes);
    Json cores = Json::array();
    for (const CoreMemory& c : n.cores) {
      Json cj;
      cj["neuroncore"] = c.local_index;
      cj["device_memory_bytes"] = Opt(c.device_bytes);
      cj["host_memory_bytes"] = Opt(c.host_bytes);
      cj["device_memory_by_category_bytes"] = Categories(c.categories);
      Json models = Json::array();
      for (const ModelMemory& m : c.models) {
        Json mj;
        mj["model_id"] = m.model_id;
        mj["name"] = m.name;
        mj["pid"] = m.pid;
        mj["device_memory_bytes"] = Opt(m.device_bytes);
        mj["host_memory_bytes"] = Opt(m.host_bytes);
        mj["device_memory_by_category_bytes"] = Categories(m.categories);
        models.push_back(std::move(mj));
      }
      cj["models"] = std::move(models);
      cores.push_back(std::move(cj));
    }
    d["neuroncores"] = std::move(cores);
    out.push_back(std::move(d));
  }
  return out;
}

Json Devices(const AppView& all) {
  Json out = Json::array();
  for (const DeviceRow& r : all.grid) {
    Json d;
    d["neuron_device"] = r.index;
    d["state"] = r.state ? Json(std::string(DeviceStateName(*r.state))) : Json();
    d["ecc_errors"] = Opt(r.ecc_errors);
    Json cores = Json::array();
    for (const CoreCell& c : r.cores) {
      Json cj;
      cj["neuroncore_id"] = c.core_id;
      cj["utilization_ratio"] = Opt(c.utilization);
      cj["flops_per_second"] = Opt(c.flops_per_s);
      cores.push_back(std::move(cj));
    }
    d["neuroncores"] = std::move(cores);
    out.push_back(std::move(d));
  }
  return out;
}

Json HealthRows(const std::vector<HealthRow>& rows) {
  Json out = Json::array();
  for (const HealthRow& r : rows) {
    Json j;
    if (r.efa.empty()) {
      j["neuron_device"] = r.device;
    } else {
      j["efa_device"] = r.efa;
    }
    j["present"] = r.present;
    j["state"] = HealthStateName(r.state);
    Json components = Json::array();
    for (HealthComponent c : r.components.List()) components.push_back(HealthComponentName(c));
    j["components"] = std::move(components);
    j["reasons"] = r.reasons;
    j["degraded"] = r.degraded;
    if (!r.withheld.empty()) j["withheld"] = r.withheld;
    out.push_back(std::move(j));
  }
  return out;
}

// null when health was not asked (docs/tools-ux.md#health).
Json Health(const NodeHealthView& h) {
  if (!h.known) return Json();
  Json j;
  j["source"] = h.from_agent ? "agent" : "this read only";
  j["agent"] = h.agent;
  j["notice"] = h.notice.empty() ? Json() : Json(h.notice);
  j["stale"] = h.stale;
  j["devices"] = HealthRows(h.devices);
  j["efas"] = HealthRows(h.efas);
  return j;
}

}  // namespace

std::string ViewToJson(const TopView& v) {
  Json j;
  j["instance_type"] = v.instance_type;
  j["instance_id"] = v.instance_id;
  j["logical_neuroncore_config"] = v.lnc;
  j["neuroncore_version"] = v.nc_version;
  j["neuroncores_per_device"] = v.cores_per_device;
  j["timestamp_ms"] =
      std::chrono::duration_cast<std::chrono::milliseconds>(v.wall.time_since_epoch()).count();
  j["interval_seconds"] = v.interval_s;
  Json source;
  source["up"] = v.datastore_source.known ? Json(v.datastore_source.up) : Json();
  const std::string problem = LiveDataProblem(v.datastore_source);
  source["reason"] = problem.empty() ? Json() : Json(problem);
  j["live_data"] = std::move(source);
  // The runtimes' records through libnrt (models, tags, versions): null when no reader ran.
  Json records;
  records["up"] = v.runtime_records.known ? Json(v.runtime_records.up) : Json();
  records["reason"] = v.runtime_records.reason.empty() ? Json() : Json(v.runtime_records.reason);
  j["runtime_records"] = std::move(records);
  j["runtime_attached"] = Opt(v.runtime_attached);
  const AppView* all = v.apps.empty() ? nullptr : &v.apps.front();
  j["average_utilization_ratio"] = all != nullptr ? Opt(all->average_utilization) : Json();
  j["total_flops_per_second"] = all != nullptr ? Opt(all->total_flops_per_s) : Json();
  j["system_vcpu"] = Cpu(v.system_cpu);
  j["runtime_vcpu"] = all != nullptr ? Cpu(all->runtime_cpu) : Json();
  j["devices"] = all != nullptr ? Devices(*all) : Json::array();
  Json mem;
  Json host;
  host["total_bytes"] = all != nullptr ? Opt(all->host.total) : Json();
  host["tensors_bytes"] = all != nullptr ? Opt(all->host.tensors) : Json();
  host["constants_bytes"] = all != nullptr ? Opt(all->host.constants) : Json();
  host["dma_buffers_bytes"] = all != nullptr ? Opt(all->host.dma_buffers) : Json();
  host["application_memory_bytes"] = all != nullptr ? Opt(all->host.app_memory) : Json();
  mem["host"] = std::move(host);
  Json device;
  device["total_bytes"] = all != nullptr ? Opt(all->device.total) : Json();
  device["capacity_bytes"] = Opt(v.device_memory_capacity);
  device["by_category_bytes"] = all != nullptr ? Categories(all->device.categories) : Json();
  mem["device"] = std::move(device);
  j["memory"] = std::move(mem);
  j["memory_details"] = all != nullptr ? MemoryTree(all->memory_tree) : Json::array();
  Json procs = Json::array();
  for (const ProcessRow& p : v.processes) {
    Json pj;
    pj["pid"] = p.pid;
    pj["tag"] = p.tag;
    pj["command"] = p.command.empty() ? Json() : Json(p.command);
    pj["pod"] = Pod(p);
    pj["neuron_devices"] = p.devices;
    pj["neuroncore_ids"] = p.core_ids;
    pj["device_memory_bytes"] = Opt(p.device_bytes);
    pj["host_memory_bytes"] = Opt(p.host_bytes);
    pj["cpu_ratio"] = Opt(p.cpu);
    pj["utilization_ratio"] = Opt(p.utilization);
    // "NA" is neuron-ls's word for absent (a real runtime publishes no version record).
    pj["runtime_version"] =
        p.runtime_version.empty() || p.runtime_version == "NA" ? Json() : Json(p.runtime_version);
    procs.push_back(std::move(pj));
  }
  j["processes"] = std::move(procs);
  j["health"] = Health(v.health);
  j["notes"] = v.notes;
  j["errors"] = v.errors;
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace neuron::top
