#pragma once
// A ResourceSlice for the scheduler's tests (claim_allocator_test, schedule_test), shaped like the
// one neuron-device-plugin --api=dra publishes for a trn1.32xlarge (tests/fixtures/plugin/
// dra_slice_trn1.json) but with readable group ids.
#include <cstdint>
#include <string>

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

}  // namespace neuron::sim::scheduler
