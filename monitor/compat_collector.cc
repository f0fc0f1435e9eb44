// compat: the names, labels and HELP of AWS's neuron-monitor-prometheus.py
// (docs/metrics.md#compat-names, docs/metrics.md#compat-rules), so dashboards built for it keep
// working. Computed from the same ExporterView as the native metrics; per-process series come from
// live datastores and vanish at the first scrape after the process exits; runtime_tag comes from
// the runtime's records (through libnrt), else the PID. neuron-monitor's execution_latency_seconds
// percentiles have no public source and are not emitted (docs/metrics.md#compat-rules). `system_*`
// read ROOT/proc (else /proc, docs/architecture.md#process-information).
#include <array>
#include <mutex>

#include "core/model/core_ids.h"
#include "core/proc/meminfo.h"
#include "core/proc/procinfo.h"
#include "core/sample/process_usage.h"
#include "monitor/collector.h"

namespace neuron::monitor {
namespace {

using Clock = std::chrono::steady_clock;

struct CoreMemCategory {
  std::string_view metric_suffix;
  int nds_index;
};
constexpr std::array<CoreMemCategory, 5> kCoreMem{{
    {"constants", nds::kMemUsageConstantsDevice},
    {"model_code", nds::kMemUsageCodeDevice},
    {"model_shared_scratchpad", nds::kMemUsageScratchpadDevice},
    {"runtime_memory", nds::kMemUsageMiscDevice},
    {"tensors", nds::kMemUsageTensorsDevice},
}};
constexpr std::array<std::pair<std::string_view, int>, 6> kErrorTypes{{
    {"generic", nds::kErrGeneric},
    {"numerical", nds::kErrNumerical},
    {"transient", nds::kErrTransient},
    {"model", nds::kErrModel},
    {"runtime", nds::kErrRt},
    {"hardware", nds::kErrHw},
}};
constexpr std::array<std::pair<std::string_view, int>, 6> kStatusTypes{{
    {"completed", nds::kInferCompleted},
    {"completed_with_err", nds::kInferCompletedWithErr},
    {"completed_with_num_err", nds::kInferCompletedWithNumErr},
    {"timed_out", nds::kInferTimedOut},
    {"incorrect_input", nds::kInferIncorrectInput},
    {"failed_to_queue", nds::kInferFailedToQueue},
}};

// Compat labels: the instance labels, then `extra`.
Labels With(const Labels& inst, std::initializer_list<prometheus::ClientMetric::Label> extra) {
  Labels l = inst;
  l.insert(l.end(), extra.begin(), extra.end());
  return l;
}

// One runtime process, merged over its datastores (a runtime may span devices).
struct Proc {
  std::string tag;
  uint64_t host = 0, device = 0;
  std::array<uint64_t, kErrorTypes.size()> errors{};
  std::array<uint64_t, kStatusTypes.size()> status{};
};

// The per-process families, in output order.
struct RuntimeFamilies {
  FamilyBuilder util = Gauge("neuroncore_utilization_ratio", "NeuronCore utilization ratio");
  FamilyBuilder rt_cpu = Gauge("neuron_runtime_vcpu_usage_ratio", "Runtime vCPU utilization ratio");
  FamilyBuilder rt_mem = Gauge("neuron_runtime_memory_used_bytes", "Runtime memory used bytes");
  std::vector<FamilyBuilder> core_mem;  // kCoreMem order
  FamilyBuilder errors = Counter("execution_errors_total", "Execution errors total");
  FamilyBuilder status = Counter("execution_status_total", "Execution status total");

  RuntimeFamilies() {
    for (const CoreMemCategory& c : kCoreMem) {
      core_mem.push_back(
          Gauge("neuroncore_memory_usage_" + std::string(c.metric_suffix),
                "NeuronCore memory utilization for " + std::string(c.metric_suffix)));
    }
  }
  void Finish(Families& out) {
    util.Finish(out);
    rt_cpu.Finish(out);
    rt_mem.Finish(out);
    for (FamilyBuilder& f : core_mem) f.Finish(out);
    errors.Finish(out);
    status.Finish(out);
  }
};

// Folds one datastore into its process and adds the per-core series of the slots it holds.
void AddRecord(const ScrapeContext& ctx, const Labels& inst, const DatastoreRecord& rec, Proc& p,
               RuntimeFamilies& f) {
  const Snapshot& snap = ctx.snap();
  const int per_device = ctx.inventory().LogicalCoresPerDevice();
  // A base that could not read the datastores has no records to measure from.
  const Snapshot* base = ctx.live_since_base() ? ctx.view.base.get() : nullptr;
  p.tag = RuntimeTag(snap.runtime_records.Find(rec.key()), rec.pid);
  for (int i = nds::kMemUsageCodeHost; i <= nds::kMemUsageMiscHost; ++i) {
    p.host += rec.device_counters[i];
  }
  // Counter `index` of logical core `slot`, from its physical cores' counter sets.
  auto core_counter = [&](int slot, int index) {
    return LogicalCoreCounter(rec, slot, index, snap.lnc);
  };
  for (int slot = 0; slot < per_device && slot < nds::kMaxCores; ++slot) {
    for (size_t i = 0; i < kErrorTypes.size(); ++i) {
      p.errors[i] += core_counter(slot, kErrorTypes[i].second);
    }
    for (size_t i = 0; i < kStatusTypes.size(); ++i) {
      p.status[i] += core_counter(slot, kStatusTypes[i].second);
    }
    for (const CoreMemCategory& c : kCoreMem) p.device += core_counter(slot, c.nds_index);
    if (!HoldsCore(rec, slot, snap.lnc)) continue;
    const std::string core = Str(GlobalCoreId(rec.device, slot, per_device));
    for (size_t c = 0; c < kCoreMem.size(); ++c) {
      f.core_mem[c].Add(With(inst, {L("memory_location", "None"), L("neuroncore", core),
                                    L("runtime_tag", p.tag)}),
                        static_cast<double>(core_counter(slot, kCoreMem[c].nds_index)));
    }
    if (base == nullptr) continue;
    const std::optional<double> util = ActivityBetween(*base, snap, rec, slot).utilization;
    if (!util) continue;
    f.util.Add(With(inst, {L("neuron_device", Str(rec.device)), L("neuroncore", core),
                           L("runtime_tag", p.tag)}),
               *util);
  }
}

class CompatCollector final : public Collector {
 public:
  std::string_view name() const override { return "compat"; }
  absl::Status Collect(const ScrapeContext& ctx, Families& out) override;

 private:
  struct CpuState {
    Clock::time_point when;
    SystemCpuTimes times;
  };
  struct ProcCpu {
    Clock::time_point when;
    uint64_t utime = 0;
    uint64_t stime = 0;
    std::optional<std::pair<double, double>> ratio;  // user, system
  };

  void SystemMetrics(const ScrapeContext& ctx, const Labels& inst, Families& out);
  std::optional<std::pair<double, double>> SystemCpuRatio(const SystemCpuTimes& cpu);
  void RuntimeMetrics(const ScrapeContext& ctx, const Labels& inst, Families& out);
  void AddProcess(const ProcReader& proc_reader, int pid, const Proc& p, const Labels& inst,
                  RuntimeFamilies& f);
  std::optional<std::pair<double, double>> ProcessCpu(const ProcReader& proc, int pid);

  std::mutex mu_;  // guards the CPU-time history below (scrapes run concurrently)
  std::optional<CpuState> cpu_prev_;
  std::optional<std::pair<double, double>> cpu_ratio_;  // last computed (user, system)
  std::map<int, ProcCpu> proc_cpu_;
};

// (user, system) share of CPU time since the last computation, once one is at least a second
// old: concurrent scrapes would otherwise see zero-length windows.
std::optional<std::pair<double, double>> CompatCollector::SystemCpuRatio(
    const SystemCpuTimes& cpu) {
  std::lock_guard<std::mutex> lock(mu_);
  const Clock::time_point now = Clock::now();
  if (!cpu_prev_) {
    cpu_prev_ = CpuState{now, cpu};
  } else if (now - cpu_prev_->when >= std::chrono::seconds(1)) {
    const SystemCpuTimes& a = cpu_prev_->times;
    const double total = static_cast<double>(cpu.TotalTicks() - a.TotalTicks());
    if (total > 0 && cpu.TotalTicks() >= a.TotalTicks()) {
      const double user = static_cast<double>(cpu.UserTicks() - a.UserTicks()) / total;
      const double sys =
          static_cast<double>(cpu.SystemTicks() + cpu.iowait - a.SystemTicks() - a.iowait) / total;
      cpu_ratio_ = std::pair{std::min(1.0, user), std::min(1.0, sys)};
    }
    cpu_prev_ = CpuState{now, cpu};
  }
  return cpu_ratio_;
}

void CompatCollector::SystemMetrics(const ScrapeContext& ctx, const Labels& inst, Families& out) {
  ProcReader proc{RootPaths(ctx.source.options().node.root)};
  FamilyBuilder count = Gauge("system_vcpu_count", "System vCPU count");
  FamilyBuilder usage = Gauge("system_vcpu_usage_ratio", "System CPU utilization ratio");
  absl::StatusOr<SystemCpuTimes> cpu = proc.SystemCpu();
  if (cpu.ok()) {
    count.Add(inst, cpu->cpus);
    if (const auto ratio = SystemCpuRatio(*cpu)) {
      usage.Add(With(inst, {L("usage_type", "user")}), ratio->first);
      usage.Add(With(inst, {L("usage_type", "system")}), ratio->second);
    }
  }
  count.Finish(out);
  usage.Finish(out);
  const absl::StatusOr<MemInfo> mem = ReadMeminfo(proc);
  if (!mem.ok()) return;
  struct MemPair {
    std::string_view total_metric, used_metric, help_total, help_used;
    std::optional<uint64_t> total, used;
  };
  for (const MemPair& m :
       {MemPair{"system_memory_total_bytes", "system_memory_used_bytes",
                "System memory total_bytes bytes", "System memory used_bytes bytes", mem->mem_total,
                mem->MemUsed()},
        MemPair{"system_swap_total_bytes", "system_swap_used_bytes",
                "System swap total_bytes bytes", "System swap used_bytes bytes", mem->swap_total,
                mem->SwapUsed()}}) {
    if (!m.total || !m.used) continue;
    FamilyBuilder t = Gauge(std::string(m.total_metric), std::string(m.help_total));
    t.Add(inst, static_cast<double>(*m.total));
    t.Finish(out);
    FamilyBuilder u = Gauge(std::string(m.used_metric), std::string(m.help_used));
    u.Add(inst, static_cast<double>(*m.used));
    u.Finish(out);
  }
}

std::optional<std::pair<double, double>> CompatCollector::ProcessCpu(const ProcReader& proc,
                                                                     int pid) {
  absl::StatusOr<ProcessStat> st = proc.Stat(pid);
  if (!st.ok()) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  const Clock::time_point now = Clock::now();
  auto [it, inserted] = proc_cpu_.try_emplace(pid);
  ProcCpu& p = it->second;
  if (inserted) {
    p = ProcCpu{now, st->utime, st->stime, std::nullopt};
    return std::nullopt;
  }
  const double dt = std::chrono::duration<double>(now - p.when).count();
  if (dt >= 1.0 && st->utime >= p.utime && st->stime >= p.stime) {
    const double tps = static_cast<double>(ProcReader::TicksPerSecond());
    p.ratio = std::pair{static_cast<double>(st->utime - p.utime) / tps / dt,
                        static_cast<double>(st->stime - p.stime) / tps / dt};
    p.when = now;
    p.utime = st->utime;
    p.stime = st->stime;
  }
  return p.ratio;
}

void CompatCollector::AddProcess(const ProcReader& proc_reader, int pid, const Proc& p,
                                 const Labels& inst, RuntimeFamilies& f) {
  f.rt_mem.Add(With(inst, {L("memory_location", "host"), L("runtime_tag", p.tag)}),
               static_cast<double>(p.host));
  f.rt_mem.Add(With(inst, {L("memory_location", "neuron_device"), L("runtime_tag", p.tag)}),
               static_cast<double>(p.device));
  for (size_t i = 0; i < kErrorTypes.size(); ++i) {
    f.errors.Add(
        With(inst, {L("error_type", std::string(kErrorTypes[i].first)), L("runtime_tag", p.tag)}),
        static_cast<double>(p.errors[i]));
  }
  for (size_t i = 0; i < kStatusTypes.size(); ++i) {
    f.status.Add(
        With(inst, {L("status_type", std::string(kStatusTypes[i].first)), L("runtime_tag", p.tag)}),
        static_cast<double>(p.status[i]));
  }
  if (const auto cpu = ProcessCpu(proc_reader, pid)) {
    f.rt_cpu.Add(With(inst, {L("runtime_tag", p.tag), L("usage_type", "user")}), cpu->first);
    f.rt_cpu.Add(With(inst, {L("runtime_tag", p.tag), L("usage_type", "system")}), cpu->second);
  }
}

// Per live runtime process: only from the datastores, so nothing at all without them
// (docs/architecture.md#unknown-is-not-zero); the processes are unknown then, not gone.
void CompatCollector::RuntimeMetrics(const ScrapeContext& ctx, const Labels& inst, Families& out) {
  if (!ctx.live()) return;
  RuntimeFamilies f;
  std::map<int, Proc> procs;
  for (const DatastoreRecord& rec : ctx.snap().processes) {
    AddRecord(ctx, inst, rec, procs[rec.pid], f);
  }
  const ProcReader proc_reader{RootPaths(ctx.source.options().node.root)};
  for (const auto& [pid, p] : procs) AddProcess(proc_reader, pid, p, inst, f);
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(proc_cpu_, [&](const auto& kv) { return procs.count(kv.first) == 0; });
  }
  f.Finish(out);
}

// instance_info and neuron_hardware_info: constant 1, the facts in the labels.
void IdentityMetrics(const Inventory& inv, const Labels& inst, Families& out) {
  FamilyBuilder instance = Gauge("instance_info", "EC2 instance information");
  instance.Add(inst, 1);
  instance.Finish(out);
  FamilyBuilder hw = Gauge("neuron_hardware_info", "Neuron Hardware Information");
  std::optional<uint64_t> mem;
  for (const NeuronDevice& d : inv.devices) mem = d.memory_bytes ? d.memory_bytes : mem;
  hw.Add(With(inst, {L("neuron_device_count", Str(static_cast<int>(inv.devices.size()))),
                     L("neuron_device_memory_size", mem ? std::to_string(*mem) : ""),
                     L("neuroncore_per_device_count", Str(inv.LogicalCoresPerDevice()))}),
         1);
  hw.Finish(out);
}

void EccMetrics(const Snapshot& snap, const Labels& inst, Families& out) {
  FamilyBuilder ecc = Counter("hardware_ecc_events_total", "Hardware ecc events total");
  for (const DeviceSample& d : snap.devices) {
    // neuron-monitor's two event types (its label values happen to be the files' names).
    for (const auto& [v, type] :
         {std::pair{d.hardware.sram_ecc_uncorrected, "sram_ecc_uncorrected"},
          {d.hardware.mem_ecc_uncorrected, "mem_ecc_uncorrected"}}) {
      if (!v) continue;
      ecc.Add(With(inst, {L("event_type", type), L("neuron_device_index", Str(d.index))}),
              static_cast<double>(*v));
    }
  }
  ecc.Finish(out);
}

absl::Status CompatCollector::Collect(const ScrapeContext& ctx, Families& out) {
  const Labels inst = InstanceLabels(ctx);
  IdentityMetrics(ctx.inventory(), inst, out);
  SystemMetrics(ctx, inst, out);
  RuntimeMetrics(ctx, inst, out);
  EccMetrics(ctx.snap(), inst, out);
  return absl::OkStatus();
}

}  // namespace

std::unique_ptr<Collector> MakeCompatCollector() { return std::make_unique<CompatCollector>(); }

}  // namespace neuron::monitor
