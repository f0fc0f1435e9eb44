#pragma once
// The soak's invariants as functions of what the kubelet emulator, the pods and the simulator's
// files say: double booking, contiguity and connectivity of allocations, and hardware health
// against the simulator's ground truth (docs/architecture.md#health, #allocation). Pure apart from
// reading files.

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/driver/sysfs_names.h"
#include "core/model/topology.h"
#include "driver-sim/kubelet/kubelet_emulator.h"

namespace neuron::soak {

// Integer IDs a pod holds of `resource`, over its containers, sorted.
std::vector<int> PodIds(const sim::AdmittedPod& pod, const std::string& resource);

// Cores held by more than one pod, whole devices counted as their cores; one line per core
// ("core 5: default/p12 default/p40"). Empty when nothing is double-booked.
std::vector<std::string> DoubleBooked(const std::vector<sim::AdmittedPod>& pods,
                                      int cores_per_device);

// IDs of `resource` the kubelet could hand out now: listed healthy and held by no pod.
std::vector<int> FreeIds(const sim::ResourceState& state, const std::vector<sim::AdmittedPod>& pods,
                         const std::string& resource);

// Whether `ids` (device indices, or global cores when `cores`) form one contiguous range whose
// devices are connected on the NeuronLink graph.
bool ContiguousConnected(const Topology& topology, int cores_per_device, std::vector<int> ids,
                         bool cores);
// Whether some contiguous, connected set of `n` units exists among `free`.
bool ContiguousConnectedExists(const Topology& topology, int cores_per_device,
                               const std::vector<int>& free, int n, bool cores);

// The health evidence at a moment when everything was known clean (after every device was reset
// to READY with no faults running): the uncorrected ECC counters and the last kmsg sequence.
struct Baseline {
  std::vector<std::array<uint64_t, 3>> ecc;  // per device: sram, mem, mem repairable
  int64_t kmsg_seq = -1;
};
Baseline TakeBaseline(const RootPaths& paths, int devices);

// The simulator's ground truth of hardware health (docs/architecture.md#health), read from its
// files: a device is healthy when present, READY, with no uncorrected ECC rise and no NEURON_HW_ERR
// record naming it since `baseline`; an EFA when present with its port ACTIVE.
struct HwTruth {
  std::vector<bool> device_healthy;
  std::vector<std::string> device_reason;  // why not ("absent", "state 2", "ecc", "hw_err")
  std::map<std::string, bool> efa_healthy;
};
HwTruth GroundTruth(const RootPaths& paths, int devices, const std::vector<std::string>& efas,
                    const Baseline& baseline);

// Compares the kubelet's view of every ID with the ground truth, the double-booking mask aside:
// an ID the mask hides (a core of a device a pod holds whole; a device one of whose cores a pod
// holds) must be Unhealthy, every other ID as healthy as its hardware. One line per mismatch.
struct HealthComparison {
  int ids = 0;        // IDs compared
  int masked = 0;     // of which masked
  int unhealthy = 0;  // hardware-unhealthy devices and EFAs in the truth
  std::vector<std::string> mismatches;
};
HealthComparison CompareHealth(const HwTruth& truth, const sim::KubeletEmulator& kubelet,
                               int cores_per_device);

}  // namespace neuron::soak
