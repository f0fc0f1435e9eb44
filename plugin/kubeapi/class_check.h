#pragma once
// Whether the cluster's DeviceClass neuron.aws.com selects NeuronCores. AWS's Helm chart installs
// it with one selector, `device.driver == "neuron.aws.com"`; with the plugin's
// --dra.partitionable the pool also holds NeuronCores (resourceType neuron_core), which that
// class then selects as well. A core and its device consume the same counters, so AWS's
// allocationMode All templates, and count templates that get cores where they meant devices,
// find no allocation. Our overlay's class (deploy/overlays/dra/deviceclasses.yaml) restricts
// resourceType to neuron_device and neuron_node.
//
// The check runs only while the plugin's document has a NeuronCore: it reads the class (GET
// /apis/resource.k8s.io/v1/deviceclasses/neuron.aws.com; RBAC: deviceclasses get), compiles each
// selector's CEL with the subset of core/cel/cel_subset.h, and evaluates the selectors, in order
// as kube-scheduler's allocator does, on one NeuronCore and one Neuron device of the document.
// What it cannot decide (403, an expression outside the subset, an evaluation error, another API
// error) is kUnknown, never kFine. The outcome is logged once per change, plainly, on the logger
// "dra-api.class".
//
// Thread-safety: Observe from one thread at a time (the slice publisher's); verdict() and gets()
// from any.

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cel/cel_subset.h"
#include "nlohmann/json.hpp"
#include "plugin/kubeapi/client.h"

namespace spdlog {
class logger;
}

namespace neuron::kubeapi {

enum class ClassVerdict {
  kNotChecked,    // no NeuronCore in the document (or nothing read yet): nothing to check
  kFine,          // its selectors do not select the NeuronCore
  kSelectsCores,  // its selectors select the NeuronCore
  kAbsent,        // the cluster has no DeviceClass neuron.aws.com (404)
  kUnknown,       // cannot tell: 403, CEL outside the subset or failing, another API error
};

struct ClassFinding {
  ClassVerdict verdict = ClassVerdict::kNotChecked;
  std::string message;  // what an operator is told
};

// A device of a slice of `driver` as a selector sees it: an unqualified attribute name is in the
// driver's domain; values typed as the slice types them (string, int, bool, version). A value of
// another type is left out (a selector reading it then fails to evaluate).
cel::DeviceView DeviceViewOf(const nlohmann::json& device, std::string_view driver);

// The class as its GET answered, judged on the first NeuronCore and the first Neuron device of
// `slices` (the document's neuron.aws.com slices). kNotChecked when they hold no NeuronCore.
ClassFinding JudgeDeviceClass(const absl::StatusOr<nlohmann::json>& device_class,
                              const std::vector<nlohmann::json>& slices);

class ClassCheck {
 public:
  // `resync`: only named in messages (the caller decides when a check is due).
  ClassCheck(const Client& client, std::chrono::milliseconds resync);

  // The document's neuron.aws.com slices, as the publisher read them. Checks when `due` (the
  // publisher's resync) or when the set of the document's resourceTypes changed since the last
  // call; a document without NeuronCores is never checked (no GET).
  void Observe(const std::vector<nlohmann::json>& slices, bool due);

  ClassVerdict verdict() const;
  uint64_t gets() const;  // GETs of the class made so far

 private:
  void Report(const ClassFinding& f);

  const Client& client_;
  const std::chrono::milliseconds resync_;
  const std::shared_ptr<spdlog::logger> log_;
  std::set<std::string> kinds_;  // the resourceTypes last observed
  bool observed_ = false;
  ClassFinding last_;  // last reported

  mutable std::mutex mu_;
  ClassVerdict verdict_ = ClassVerdict::kNotChecked;
  uint64_t gets_ = 0;
};

}  // namespace neuron::kubeapi
