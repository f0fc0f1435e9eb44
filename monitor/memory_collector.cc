// memory: device memory by category, host memory by category, per-core used and peak, device
// total (docs/metrics.md#device-utilization-memory). Categories are the driver's directory names
// verbatim.
#include "core/model/core_ids.h"
#include "monitor/collector.h"

namespace neuron::monitor {
namespace {

class MemoryCollector final : public Collector {
 public:
  std::string_view name() const override { return "memory"; }
  absl::Status Collect(const ScrapeContext& ctx, Families& out) override {
    FamilyBuilder total = Gauge("neuron_device_memory_total_bytes",
                                "Device memory (HBM) size from the instance catalog.");
    FamilyBuilder dev = Gauge("neuron_device_memory_used_bytes",
                              "Device memory allocated now by category: sum over cores of "
                              "neuron_core<i>/stats/memory_usage/device_mem/<category>/total.");
    FamilyBuilder host = Gauge("neuron_host_memory_used_bytes",
                               "Host memory allocated now for the device by category: "
                               "stats/memory_usage/host_mem/<category>/total.");
    FamilyBuilder core_used =
        Gauge("neuroncore_memory_used_bytes",
              "Device memory allocated now by the NeuronCore: device_mem/total (summed over the "
              "physical cores of a logical core).");
    FamilyBuilder core_peak = Gauge("neuroncore_memory_peak_bytes",
                                    "High-water mark of the NeuronCore's device memory: "
                                    "device_mem/peak.");
    const Snapshot& snap = ctx.snap();
    const int per_device = ctx.inventory().LogicalCoresPerDevice();
    for (const DeviceSample& d : snap.devices) {
      if (const NeuronDevice* nd = ctx.inventory().FindDevice(d.index);
          nd != nullptr && nd->memory_bytes) {
        total.Add(DeviceLabels(d.index), static_cast<double>(*nd->memory_bytes));
      }
      for (size_t c = 0; c < kDeviceMemCategories.size(); ++c) {
        std::optional<uint64_t> sum;
        for (const CoreSample& core : d.cores) {
          if (const auto& v = core.device_mem_by_category[c].total) sum = sum.value_or(0) + *v;
        }
        if (!sum) continue;
        Labels l = DeviceLabels(d.index);
        l.push_back(L("category", std::string(kDeviceMemCategories[c])));
        dev.Add(std::move(l), static_cast<double>(*sum));
      }
      for (size_t c = 0; c < kHostMemCategories.size(); ++c) {
        if (!d.host_mem[c].total) continue;
        Labels l = DeviceLabels(d.index);
        l.push_back(L("category", std::string(kHostMemCategories[c])));
        host.Add(std::move(l), static_cast<double>(*d.host_mem[c].total));
      }
      for (const LogicalCoreTotals& lc : LogicalCores(snap, d)) {
        const int global = GlobalCoreId(d.index, lc.logical_index, per_device);
        if (lc.device_mem.total) {
          core_used.Add(CoreLabels(d.index, global), static_cast<double>(*lc.device_mem.total));
        }
        if (lc.device_mem.peak) {
          core_peak.Add(CoreLabels(d.index, global), static_cast<double>(*lc.device_mem.peak));
        }
      }
    }
    total.Finish(out);
    dev.Finish(out);
    host.Finish(out);
    core_used.Finish(out);
    core_peak.Finish(out);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Collector> MakeMemoryCollector() { return std::make_unique<MemoryCollector>(); }

}  // namespace neuron::monitor
