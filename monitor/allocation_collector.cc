// allocation: info metrics joining devices, cores and EFA interfaces to the pods that hold them,
// from the kubelet's PodResources List() as last cached (docs/metrics.md#pod-attribution). Never
// calls the kubelet: the cache refreshes on its own thread.
#include <mutex>
#include <set>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "core/base/component_log.h"
#include "core/model/core_ids.h"
#include "core/model/device_id.h"
#include "fmt/format.h"
#include "monitor/collector.h"

namespace neuron::monitor {
namespace {

// A PodResources ID of a device-indexed resource, placed on this node.
struct PlacedId {
  int device = 0;
  std::optional<int> core;  // a neuroncore ID's global core
};

// The kubelet's answer is outside input: an ID must be a decimal index below the driver's limits
// (core/model/device_id.h), so no arithmetic on it can overflow, and name a device this node has.
absl::StatusOr<PlacedId> PlaceId(Resource r, std::string_view id, const std::set<int>& present,
                                 int per_device) {
  const bool core = r == Resource::kNeuronCore;
  absl::StatusOr<int> index = ParseIndexId(id, core ? kMaxDevices * per_device : kMaxDevices);
  if (!index.ok()) return index.status();
  const int device = core ? DeviceOfCore(*index, per_device) : *index;
  if (!present.contains(device)) {
    return absl::NotFoundError(fmt::format("device {} is not on this node", device));
  }
  return PlacedId{device, core ? std::optional<int>(*index) : std::nullopt};
}

// A DRA claim device says which claim and driver granted it; the `claim` label has the
// cardinality of `pod` (one generated claim per pod and request at most).
Labels PodLabels(const PodDeviceAssignment& a) {
  Labels l{L("namespace", a.pod_namespace), L("pod", a.pod_name), L("container", a.container)};
  if (a.claim) l.push_back(L("claim", a.claim->claim_name));
  return l;
}
prometheus::ClientMetric::Label ResourceLabel(const PodDeviceAssignment& a) {
  return L("resource", a.claim ? a.claim->driver : a.resource);
}

class AllocationCollector final : public Collector {
 public:
  std::string_view name() const override { return "allocation"; }
  absl::Status Collect(const ScrapeContext& ctx, Families& out) override {
    FamilyBuilder cores = Gauge(
        "neuroncore_allocation_info",
        "The pod container holding the NeuronCore (kubelet PodResources); a whole-device grant "
        "lists every core of the device.");
    FamilyBuilder devices = Gauge("neuron_device_allocation_info",
                                  "A pod container holding the device or some of its cores.");
    FamilyBuilder efas =
        Gauge("neuron_efa_allocation_info", "The pod container holding the EFA interface.");
    FamilyBuilder dra = Gauge("neuron_dra_device_allocation_info",
                              "A DRA device of a ResourceClaim held by a pod container, named as "
                              "its driver published it (kubelet PodResources DynamicResource).");
    const Inventory& inv = ctx.inventory();
    const int per_device = std::min(inv.LogicalCoresPerDevice(), kMaxCoresPerDevice);
    std::set<int> present;
    for (const NeuronDevice& d : inv.devices) present.insert(d.index);
    // One device series per (device, labels): several cores of one device, or a DRA claim's
    // core and device, name the same holder.
    std::set<std::pair<int, Labels>> dev_seen;
    auto add_device = [&](int device, const PodDeviceAssignment& a) {
      Labels l = DeviceLabels(device);
      l.push_back(ResourceLabel(a));
      for (auto& p : PodLabels(a)) l.push_back(std::move(p));
      if (!dev_seen.emplace(device, l).second) return;
      devices.Add(std::move(l), 1);
    };
    auto add_core = [&](int device, int global, const PodDeviceAssignment& a) {
      Labels l = CoreLabels(device, global);
      l.push_back(ResourceLabel(a));
      for (auto& p : PodLabels(a)) l.push_back(std::move(p));
      cores.Add(std::move(l), 1);
    };
    auto add_whole_device = [&](int device, const PodDeviceAssignment& a) {
      for (int k = 0; k < per_device; ++k) add_core(device, GlobalCoreId(device, k, per_device), a);
      add_device(device, a);
    };
    for (const PodDeviceAssignment& a : ctx.view.pods->all()) {
      if (a.claim) {
        Labels l{L("driver", a.claim->driver), L("pool", a.claim->pool),
                 L("device", a.claim->device)};
        for (auto& p : PodLabels(a)) l.push_back(std::move(p));
        dra.Add(std::move(l), 1);
      }
      if (a.whole_node) {  // our UltraServer device `neuron-node`: every device of the node
        for (int d : present) {
          if (per_device > 0) add_whole_device(d, a);
        }
        continue;
      }
      absl::StatusOr<Resource> r = ParseResourceName(a.resource);
      if (!r.ok()) continue;  // another vendor's resource
      for (const std::string& id : a.ids) {
        if (*r == Resource::kEfa) {
          Labels l{L("efa_device", id)};
          for (auto& p : PodLabels(a)) l.push_back(std::move(p));
          efas.Add(std::move(l), 1);
          continue;
        }
        if (per_device <= 0) continue;
        const absl::StatusOr<PlacedId> placed = PlaceId(*r, id, present, per_device);
        if (!placed.ok()) {
          Refused(a, id, placed.status());
        } else if (placed->core) {
          add_core(placed->device, *placed->core, a);
          add_device(placed->device, a);
        } else {
          add_whole_device(placed->device, a);
        }
      }
    }
    cores.Finish(out);
    devices.Finish(out);
    efas.Finish(out);
    dra.Finish(out);
    return absl::OkStatus();
  }

 private:
  // Says once why an ID gets no series; the answer is re-read every scrape, so a bounded set of
  // IDs already told keeps the log from repeating it.
  void Refused(const PodDeviceAssignment& a, const std::string& id, const absl::Status& why) {
    constexpr size_t kRemembered = 256;
    std::lock_guard<std::mutex> lock(mu_);
    const std::string key = a.resource + "/" + id;
    if (told_.size() >= kRemembered || !told_.insert(key).second) return;
    ComponentLogger("exporter")
        ->warn("PodResources: {} ID \"{}\" of pod {}/{} has no allocation series: {}", a.resource,
               id.substr(0, 32), a.pod_namespace, a.pod_name, std::string{why.message()});
  }

  std::mutex mu_;  // scrapes may run concurrently (monitor/collector.h)
  std::set<std::string> told_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<Collector> MakeAllocationCollector() {
  return std::make_unique<AllocationCollector>();
}

}  // namespace neuron::monitor
