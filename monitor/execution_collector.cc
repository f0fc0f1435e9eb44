// execution: executions and failure outcomes per core, device error counts by status name, and
// the devices' mean execution latency over the utilization window
// (docs/metrics.md#executions-errors-latency). Counts are sysfs totals plus the live datastores
// and the latency comes from the datastores alone: every family needs them (ScrapeContext::live)
// and is absent without them.
#include <array>

#include "core/model/core_ids.h"
#include "monitor/collector.h"
#include "monitor/latency.h"

namespace neuron::monitor {
namespace {

// status/ name -> outcome label (docs/metrics.md#executions-errors-latency).
constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kOutcomes{{
    {"execute_completed_with_error", "completed_with_err"},
    {"execute_completed_with_num_error", "completed_with_num_err"},
    {"timeout", "timed_out"},
    {"exec_bad_input", "incorrect_input"},
    {"execute_failed_to_queue", "failed_to_queue"},
    {"failure", "generic_failure"},
}};

std::optional<std::string_view> OutcomeOf(std::string_view status) {
  for (const auto& [s, o] : kOutcomes) {
    if (s == status) return o;
  }
  return std::nullopt;
}

class ExecutionCollector final : public Collector {
 public:
  std::string_view name() const override { return "execution"; }
  absl::Status Collect(const ScrapeContext& ctx, Families& out) override {
    if (!ctx.live()) return absl::OkStatus();
    FamilyBuilder execs =
        Counter("neuroncore_executions_total",
                "Executions: sum of status/success and the six failure outcomes (sysfs total plus "
                "datastore).");
    FamilyBuilder fails = Counter(
        "neuroncore_execution_failures_total",
        "Failed executions by outcome: neuron_core<i>/stats/status/<name>/total plus datastore.");
    FamilyBuilder errors =
        Counter("neuron_device_execution_errors_total",
                "Execution errors by status name, summed over the device's cores: "
                "stats/status/<error>/total plus datastore.");
    FamilyBuilder latency =
        Gauge("neuron_execution_latency_mean_seconds",
              "Mean latency of the executions completed on the device over the utilization window: "
              "rise of the datastores' LATENCY_TOTAL (latency=total, submission to completion) or "
              "LATENCY_DEVICE (latency=device) over the rise of INFER_COMPLETED; µs assumed.");
    const Snapshot& snap = ctx.snap();
    const int per_device = ctx.inventory().LogicalCoresPerDevice();
    for (const DeviceSample& d : snap.devices) {
      if (!ctx.live(d.index)) continue;
      std::array<std::optional<uint64_t>, kStatusCounters.size()> device_sum{};
      for (const LogicalCoreTotals& lc : LogicalCores(snap, d)) {
        const int global = GlobalCoreId(d.index, lc.logical_index, per_device);
        std::optional<uint64_t> total;
        for (size_t i = 0; i < kStatusCounters.size(); ++i) {
          const std::optional<uint64_t>& v = lc.status[i];
          if (!v) continue;
          const std::string_view sname = kStatusCounters[i].sysfs;
          const std::optional<std::string_view> outcome = OutcomeOf(sname);
          if (sname == "success" || outcome) total = total.value_or(0) + *v;
          if (outcome) {
            Labels l = CoreLabels(d.index, global);
            l.push_back(L("outcome", std::string(*outcome)));
            fails.Add(std::move(l), ctx.Mono(d.index, Key("fail", sname, global), *v));
          } else if (sname != "success") {
            device_sum[i] = device_sum[i].value_or(0) + *v;
          }
        }
        if (total) {
          execs.Add(CoreLabels(d.index, global),
                    ctx.Mono(d.index, Key("execs", "", global), static_cast<double>(*total)));
        }
      }
      for (size_t i = 0; i < kStatusCounters.size(); ++i) {
        if (!device_sum[i]) continue;
        Labels l = DeviceLabels(d.index);
        l.push_back(L("error", std::string(kStatusCounters[i].sysfs)));
        errors.Add(std::move(l),
                   ctx.Mono(d.index, Key("err", kStatusCounters[i].sysfs, -1), *device_sum[i]));
      }
      if (!ctx.live_since_base(d.index)) continue;
      if (const std::optional<LatencyMean> m = MeanLatency(*ctx.view.base, snap, d.index)) {
        Labels total = DeviceLabels(d.index);
        total.push_back(L("latency", "total"));
        latency.Add(std::move(total), m->total_seconds);
        Labels device = DeviceLabels(d.index);
        device.push_back(L("latency", "device"));
        latency.Add(std::move(device), m->device_seconds);
      }
    }
    execs.Finish(out);
    fails.Finish(out);
    errors.Finish(out);
    latency.Finish(out);
    return absl::OkStatus();
  }

 private:
  static std::string Key(std::string_view what, std::string_view name, int core) {
    return std::string(what) + "/" + std::string(name) + "/" + std::to_string(core);
  }
};

}  // namespace

std::unique_ptr<Collector> MakeExecutionCollector() {
  return std::make_unique<ExecutionCollector>();
}

}  // namespace neuron::monitor
