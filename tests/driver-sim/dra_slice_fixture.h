#pragma once
// A ResourceSlice for the scheduler's tests (claim_allocator_test, schedule_test), shaped like the
// one neuron-device-plugin --api=dra publishes for a trn1.32xlarge (tests/fixtures/plugin/
// dra_slice_trn1.json) but with readable group ids.
#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace neuron::sim::scheduler {

// A trn1.32xlarge-shaped slice: 16 devices in connected groups of 4 (group of device i: i / 4),
// and 8 EFA interfaces, two beside each group.
inline nlohmann::json Trn1Slice(const std::string& node, int64_t generation = 1) {
  using nlohmann::json;
  json devices = json::array();
  for (int i = 0; i < 16; ++i) {
    devices.push_back(
        {{"name", "neuron-" + std::to_string(i)},
         {"attributes",
          {{"resourceType", {{"string", "neuron_device"}}},
           {"deviceId", {{"int", i}}},
           {"neuronDriverVersion", {{"version", "2.24.7"}}},
           {"resource.aws.com/devicegroup4_id", {{"string", "g4-" + std::to_string(i / 4)}}},
           {"resource.aws.com/devicegroup16_id", {{"string", "g16-0"}}}}}});
  }
  for (int e = 0; e < 8; ++e) {
    devices.push_back(
        {{"name", "efa-rdmap" + std::to_string(e)},
         {"attributes",
          {{"resourceType", {{"string", "efa"}}},
           {"resource.aws.com/devicegroup4_id", {{"string", "g4-" + std::to_string(e / 2)}}},
           {"resource.aws.com/devicegroup16_id", {{"string", "g16-0"}}}}}});
  }
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata", {{"name", node + "-neuron.aws.com"}}},
          {"spec",
           {{"driver", "neuron.aws.com"},
            {"nodeName", node},
            {"pool", {{"name", node}, {"generation", generation}, {"resourceSliceCount", 1}}},
            {"devices", devices}}}};
}

// The same node as the plugin publishes it now: the 16 devices in neuron.aws.com's pool, the 8
// EFAs (with the same group attributes) in efa.neuron.aws.com's.
inline std::vector<nlohmann::json> Trn1Pools(const std::string& node) {
  using nlohmann::json;
  json neuron = Trn1Slice(node);
  json efa = neuron;
  json& devices = neuron["spec"]["devices"];
  efa["metadata"]["name"] = node + "-efa.neuron.aws.com";
  efa["spec"]["driver"] = "efa.neuron.aws.com";
  efa["spec"]["devices"] = json(devices.begin() + 16, devices.end());
  devices.erase(devices.begin() + 16, devices.end());
  return {neuron, efa};
}

// The same node's pool as `neuron-device-plugin --dra.partitionable=true` publishes it
// (docs/kubelet-api.md#resourceslices): slices[0] the Neuron devices (each consuming its
// counter "neuron-<i>" whole) and the EFAs, and with `ultraserver` the device `neuron-node`
// consuming every counter; slices[1] the counter set "neuron-devices"; slices[2] the
// NeuronCores `neuroncore-<c>`, c = i * cores + k, each consuming 1 of its device's counter.
inline std::vector<nlohmann::json> Trn1PartitionablePool(const std::string& node,
                                                         bool ultraserver = false,
                                                         int64_t cores = 2) {
  using nlohmann::json;
  json whole = Trn1Slice(node);
  json& devices = whole["spec"]["devices"];
  json counters = json::object();
  json node_use = json::object();
  json core_devices = json::array();
  for (int i = 0; i < 16; ++i) {
    const std::string counter = "neuron-" + std::to_string(i);
    const std::string value = std::to_string(cores);
    counters[counter] = {{"value", value}};
    node_use[counter] = {{"value", value}};
    devices[i]["consumesCounters"] = {
        {{"counterSet", "neuron-devices"}, {"counters", {{counter, {{"value", value}}}}}}};
    for (int64_t k = 0; k < cores; ++k) {
      core_devices.push_back(
          {{"name", "neuroncore-" + std::to_string(i * cores + k)},
           {"attributes",
            {{"resourceType", {{"string", "neuron_core"}}},
             {"deviceId", {{"int", i}}},
             {"resource.aws.com/devicegroup4_id", {{"string", "g4-" + std::to_string(i / 4)}}}}},
           {"consumesCounters",
            {{{"counterSet", "neuron-devices"}, {"counters", {{counter, {{"value", "1"}}}}}}}}});
    }
  }
  if (ultraserver) {
    devices.push_back(
        {{"name", "neuron-node"},
         {"attributes", {{"resourceType", {{"string", "neuron_node"}}}}},
         {"consumesCounters", {{{"counterSet", "neuron-devices"}, {"counters", node_use}}}}});
  }
  std::vector<json> pool = {whole, whole, whole};
  pool[1]["metadata"]["name"] = node + "-neuron.aws.com-1";
  pool[1]["spec"].erase("devices");
  pool[1]["spec"]["sharedCounters"] = {{{"name", "neuron-devices"}, {"counters", counters}}};
  pool[2]["metadata"]["name"] = node + "-neuron.aws.com-2";
  pool[2]["spec"]["devices"] = core_devices;
  for (json& slice : pool) slice["spec"]["pool"]["resourceSliceCount"] = pool.size();
  return pool;
}

}  // namespace neuron::sim::scheduler
