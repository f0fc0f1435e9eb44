// health: ECC counters, the driver's health_status/ registers and corrected-ECC counters where the
// device's tree has them, reset requests and failures, NEURON_HW_ERR kernel-log records, and the
// health verdicts the background thread judged (docs/metrics.md#health-metrics). The counters are
// sysfs files the driver updates live; the kernel-log counts need the log and are absent while it
// cannot be read (docs/architecture.md#unknown-is-not-zero: a 0 would say "no hardware error" when
// nothing could be seen); so are a device's components while its health is unknown.
#include <array>
#include <set>

#include "core/model/core_ids.h"
#include "monitor/collector.h"

namespace neuron::monitor {
namespace {

// Types AWS's Node Problem Detector matches; their series start at 0 (known in advance).
constexpr std::array<std::string_view, 4> kKnownHwErrors{
    "SRAM_UNCORRECTABLE_ERROR", "NC_UNCORRECTABLE_ERROR", "HBM_UNCORRECTABLE_ERROR", "DMA_ERROR"};

// NEURON_HW_ERR records of `device` since start, the known types from 0.
void AddHwErrors(const ScrapeContext& ctx, int device, FamilyBuilder& hw_log) {
  std::map<std::string, uint64_t> counts;
  for (std::string_view t : kKnownHwErrors) counts[std::string(t)] = 0;
  if (const auto it = ctx.view.hw_errors.find(device); it != ctx.view.hw_errors.end()) {
    for (const auto& [type, n] : it->second) counts[type] = n;
  }
  for (const auto& [type, n] : counts) {
    Labels l = DeviceLabels(device);
    l.push_back(L("error", type));
    hw_log.Add(std::move(l), static_cast<double>(n));
  }
}

// stats/hardware/health_status/ (driver 2.28, Trn2) and the corrected-ECC counters (announced
// for 2.30.2, no source), each only where the device's tree has it.
struct GroupFamilies {
  FamilyBuilder ue = Gauge(
      "neuron_device_health_uncorrected_errors",
      "Uncorrected errors the driver derives from the firmware's error registers: "
      "stats/hardware/health_status/hbm_ecc_err_count (hbm) and sram_ecc_err_count (sram, low 16 "
      "bits). A gauge: the registers are the firmware's, the driver does not count.");
  FamilyBuilder repairable = Gauge("neuron_device_health_hbm_repairable_errors",
                                   "Repairable uncorrected HBM errors: "
                                   "stats/hardware/health_status/repairable_hbm_ecc_err_count.");
  FamilyBuilder events = Counter("neuron_device_health_error_events_total",
                                 "Changes of the error registers the driver saw: "
                                 "stats/hardware/health_status/hw_error_event.");
  FamilyBuilder corrected = Counter(
      "neuron_device_ecc_corrected_errors_total",
      "Corrected ECC errors: stats/hardware/mem_ecc_corrected (hbm) and sram_ecc_corrected (sram), "
      "as read; no driver source defines them (docs/metrics.md#health-metrics).");

  void Add(const ScrapeContext& ctx, const DeviceSample& d) {
    const HealthStatusCounters& hs = d.health_status;
    for (const auto& [v, label] :
         {std::pair{hs.hbm_ecc_err_count, "hbm"}, {hs.sram_ecc_err_count, "sram"}}) {
      if (!v) continue;
      Labels l = DeviceLabels(d.index);
      l.push_back(L("memory", label));
      ue.Add(std::move(l), static_cast<double>(*v));
    }
    if (hs.repairable_hbm_ecc_err_count) {
      repairable.Add(DeviceLabels(d.index), static_cast<double>(*hs.repairable_hbm_ecc_err_count));
    }
    if (hs.hw_error_event) {
      events.Add(DeviceLabels(d.index), ctx.Mono(d.index, "hwevent", *hs.hw_error_event));
    }
    for (const auto& [v, label] : {std::pair{d.ecc_corrected.sram_ecc_corrected, "sram"},
                                   {d.ecc_corrected.mem_ecc_corrected, "hbm"}}) {
      if (!v) continue;
      Labels l = DeviceLabels(d.index);
      l.push_back(L("memory", label));
      corrected.Add(std::move(l), ctx.Mono(d.index, std::string("ecc_corr/") + label, *v));
    }
  }
  void Finish(Families& out) {
    ue.Finish(out);
    repairable.Finish(out);
    events.Finish(out);
    corrected.Finish(out);
  }
};

// One series per state, 1 on the current one (kube-state-metrics' convention): a query can
// select a state without knowing the others, and a missing series means no verdict.
void AddStates(FamilyBuilder& f, const Labels& base, HealthState current) {
  for (HealthState s : kHealthStates) {
    Labels l = base;
    l.push_back(L("state", std::string(HealthStateName(s))));
    f.Add(std::move(l), s == current ? 1 : 0);
  }
}

// The verdicts (ExporterView::health): read nothing, judged off the scrape path.
struct VerdictFamilies {
  FamilyBuilder state = Gauge(
      "neuron_device_health",
      "The device's health as the exporter judges it from every class of evidence (presence, "
      "state, uncorrected ECC rises, NEURON_HW_ERR records, the driver's unhealthy_components and "
      "heartbeat): 1 on the current state. unknown: no fault seen, but evidence could not be read "
      "(docs/metrics.md#health-verdicts).");
  FamilyBuilder component =
      Gauge("neuron_device_unhealthy_component",
            "1 for each component at fault (driver 2.30's unhealthy_components words, whatever the "
            "driver), 0 for the others; absent while the device's health is unknown.");
  FamilyBuilder degraded =
      Gauge("neuron_device_degraded",
            "1 when corrected ECC (stats/hardware/{mem,sram}_ecc_corrected) rose since the "
            "device's baseline: a flag, never unhealthy; where the driver has the counters.");
  FamilyBuilder efa = Gauge("neuron_efa_health",
                            "The EFA interface's health (present, port ACTIVE): 1 on the current "
                            "state.");

  void Add(const NodeHealth& h) {
    for (const auto& [index, v] : h.devices) {
      AddStates(state, DeviceLabels(index), v.health.state);
      if (v.health.state != HealthState::kUnknown) {
        for (size_t i = 0; i < kHealthComponentNames.size(); ++i) {
          const auto c = static_cast<HealthComponent>(i);
          Labels l = DeviceLabels(index);
          l.push_back(L("component", std::string(HealthComponentName(c))));
          component.Add(std::move(l), v.health.components.Has(c) ? 1 : 0);
        }
      }
      if (v.corrected_counters) degraded.Add(DeviceLabels(index), v.health.degraded() ? 1 : 0);
    }
    for (const auto& [name, f] : h.efas) AddStates(efa, {L("efa_device", name)}, f.state);
  }
  void Finish(Families& out) {
    state.Finish(out);
    component.Finish(out);
    degraded.Finish(out);
    efa.Finish(out);
  }
};

class HealthCollector final : public Collector {
 public:
  std::string_view name() const override { return "health"; }
  absl::Status Collect(const ScrapeContext& ctx, Families& out) override {
    FamilyBuilder ue =
        Counter("neuron_device_ecc_uncorrected_errors_total",
                "Uncorrected ECC errors: stats/hardware/mem_ecc_uncorrected (hbm) and "
                "sram_ecc_uncorrected (sram; the driver keeps its low 16 bits).");
    FamilyBuilder repairable = Counter(
        "neuron_device_hbm_repairable_uncorrected_errors_total",
        "Repairable uncorrected HBM errors: stats/hardware/mem_ecc_repairable_uncorrected.");
    FamilyBuilder resets =
        Counter("neuroncore_reset_requests_total",
                "Reset requests: neuron_core<i>/stats/other_info/reset_req_count/total.");
    FamilyBuilder reset_fail =
        Counter("neuron_device_reset_failures_total",
                "Failed resets: neuron_core0/stats/other_info/reset_fail_count/total.");
    FamilyBuilder hw_log =
        Counter("neuron_device_hw_error_log_events_total",
                "NEURON_HW_ERR=<type> records in the kernel log (ROOT/dev/kmsg) since the exporter "
                "started.");
    const Snapshot& snap = ctx.snap();
    const int per_device = ctx.inventory().LogicalCoresPerDevice();
    const bool kmsg_read = ctx.view.kmsg.known && ctx.view.kmsg.up;
    GroupFamilies groups;
    for (const DeviceSample& d : snap.devices) {
      groups.Add(ctx, d);
      const HardwareCounters& hw = d.hardware;
      for (const auto& [v, label] :
           {std::pair{hw.mem_ecc_uncorrected, "hbm"}, {hw.sram_ecc_uncorrected, "sram"}}) {
        if (!v) continue;
        Labels l = DeviceLabels(d.index);
        l.push_back(L("memory", label));
        ue.Add(std::move(l), ctx.Mono(d.index, std::string("ecc/") + label, *v));
      }
      if (hw.mem_ecc_repairable_uncorrected) {
        repairable.Add(DeviceLabels(d.index),
                       ctx.Mono(d.index, "ecc/rep", *hw.mem_ecc_repairable_uncorrected));
      }
      for (const LogicalCoreTotals& lc : LogicalCores(snap, d)) {
        if (!lc.reset_requests) continue;
        const int global = GlobalCoreId(d.index, lc.logical_index, per_device);
        resets.Add(CoreLabels(d.index, global),
                   ctx.Mono(d.index, "reset/" + Str(global), *lc.reset_requests));
      }
      if (!d.cores.empty() && d.cores[0].other_info.reset_fail_count.total) {
        reset_fail.Add(
            DeviceLabels(d.index),
            ctx.Mono(d.index, "resetfail", *d.cores[0].other_info.reset_fail_count.total));
      }
      if (kmsg_read) AddHwErrors(ctx, d.index, hw_log);
    }
    ue.Finish(out);
    repairable.Finish(out);
    groups.Finish(out);
    resets.Finish(out);
    reset_fail.Finish(out);
    hw_log.Finish(out);
    if (ctx.view.health != nullptr) {
      VerdictFamilies verdicts;
      verdicts.Add(*ctx.view.health);
      verdicts.Finish(out);
    }
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Collector> MakeHealthCollector() { return std::make_unique<HealthCollector>(); }

}  // namespace neuron::monitor
