// core: busy-seconds counter, utilization gauges, FLOPs, model loads, inferences
// (docs/metrics.md#device-utilization-memory). Counters are sysfs totals plus the live datastores,
// never decreasing; every family needs the datastores (ScrapeContext::live) and is absent without
// them.
#include "core/model/core_ids.h"
#include "monitor/collector.h"

namespace neuron::monitor {
namespace {

class CoreCollector final : public Collector {
 public:
  std::string_view name() const override { return "core"; }
  absl::Status Collect(const ScrapeContext& ctx, Families& out) override {
    if (!ctx.live()) return absl::OkStatus();
    FamilyBuilder busy = Counter(
        "neuroncore_busy_seconds_total",
        "NeuronCore busy time: neuron_core<i>/stats/other_info/nc_time_in_use/total plus the live "
        "datastores' TIME_IN_USE (mean of the physical cores of a logical core). Use rate().");
    FamilyBuilder util = Gauge(
        "neuroncore_utilization_ratio",
        "NeuronCore busy fraction between the latest sample and the newest sample at least the "
        "exporter's utilization window (default 5 s) older. Prefer "
        "rate(neuroncore_busy_seconds_total[1m]).");
    FamilyBuilder dev_util = Gauge("neuron_device_utilization_ratio",
                                   "Mean of neuroncore_utilization_ratio over the device's cores.");
    FamilyBuilder flops = Counter(
        "neuroncore_flops_total",
        "Floating-point operations: other_info/flop_count/total plus 2 x datastore MAC_COUNT.");
    FamilyBuilder loads =
        Counter("neuroncore_model_loads_total",
                "Model loads: other_info/model_load_count/total plus datastore MODEL_LOAD_COUNT.");
    FamilyBuilder infers =
        Counter("neuroncore_inferences_total",
                "Inferences: other_info/inference_count/total plus datastore INFERENCE_COUNT.");
    const Snapshot& snap = ctx.snap();
    const int per_device = ctx.inventory().LogicalCoresPerDevice();
    // In compat mode the compat collector emits neuroncore_utilization_ratio in the script's
    // shape (docs/architecture.md#compat-mode: each name once).
    const bool native_util = !ctx.options.compat;
    for (const DeviceSample& d : snap.devices) {
      if (!ctx.live(d.index)) continue;
      double util_sum = 0;
      int util_n = 0;
      for (const LogicalCoreTotals& lc : LogicalCores(snap, d)) {
        const int global = GlobalCoreId(d.index, lc.logical_index, per_device);
        auto counter = [&](FamilyBuilder& f, std::string_view key, std::optional<uint64_t> v,
                           double scale) {
          if (!v) return;
          const double value = ctx.Mono(d.index, fmt_key(key, global), *v * scale);
          f.Add(CoreLabels(d.index, global), value);
        };
        counter(busy, "busy", lc.busy_us, 1e-6);
        counter(flops, "flops", lc.flops, 1);
        counter(loads, "loads", lc.model_loads, 1);
        counter(infers, "infers", lc.inferences, 1);
        if (!ctx.live_since_base(d.index)) continue;
        const std::optional<double> u =
            Utilization(*ctx.view.base, snap, d.index, lc.logical_index);
        if (!u) continue;
        util_sum += *u;
        ++util_n;
        if (native_util) util.Add(CoreLabels(d.index, global), *u);
      }
      if (util_n > 0) dev_util.Add(DeviceLabels(d.index), util_sum / util_n);
    }
    busy.Finish(out);
    util.Finish(out);
    dev_util.Finish(out);
    flops.Finish(out);
    loads.Finish(out);
    infers.Finish(out);
    return absl::OkStatus();
  }

 private:
  static std::string fmt_key(std::string_view what, int core) {
    return std::string(what) + "/" + std::to_string(core);
  }
};

}  // namespace

std::unique_ptr<Collector> MakeCoreCollector() { return std::make_unique<CoreCollector>(); }

}  // namespace neuron::monitor
