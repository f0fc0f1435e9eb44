#include "monitor/json_stream.h"

#include <nlohmann/json.hpp>
#include <span>

#include "core/model/core_ids.h"
#include "core/proc/meminfo.h"
#include "core/proc/procinfo.h"
#include "core/sample/process_usage.h"

namespace neuron::monitor {
namespace {

using nlohmann::json;

// neuron-monitor's per-period count: a counter below its earlier value restarted from zero.
uint64_t Delta(uint64_t now, uint64_t before) { return now >= before ? now - before : now; }

void Add(json& j, uint64_t v) { j = j.get<uint64_t>() + v; }

constexpr std::pair<const char*, int> kErr[] = {
    {"generic", nds::kErrGeneric},     {"numerical", nds::kErrNumerical},
    {"transient", nds::kErrTransient}, {"model", nds::kErrModel},
    {"runtime", nds::kErrRt},          {"hardware", nds::kErrHw}};
constexpr std::pair<const char*, int> kExec[] = {
    {"completed", nds::kInferCompleted},
    {"completed_with_err", nds::kInferCompletedWithErr},
    {"completed_with_num_err", nds::kInferCompletedWithNumErr},
    {"timed_out", nds::kInferTimedOut},
    {"incorrect_input", nds::kInferIncorrectInput},
    {"failed_to_queue", nds::kInferFailedToQueue}};
constexpr std::pair<const char*, int> kHost[] = {{"application_memory", nds::kMemUsageCodeHost},
                                                 {"tensors", nds::kMemUsageTensorsHost},
                                                 {"constants", nds::kMemUsageConstantsHost},
                                                 {"dma_buffers", nds::kMemUsageScratchpadHost},
                                                 {"dma_buffers", nds::kMemUsageMiscHost}};

// A runtime's entry before any of its datastores is added: every count 0. latency_stats stay null:
// neuron-monitor's percentiles come from no public source (docs/metrics.md#json-stream).
json EmptyRuntime(const std::string& tag, int pid, double period) {
  json zeros = json::object();
  for (const auto& [k, idx] : kErr) zeros[k] = 0;
  json exec_zeros = json::object();
  for (const auto& [k, idx] : kExec) exec_zeros[k] = 0;
  json host_zeros = json::object();
  for (const auto& [k, idx] : kHost) host_zeros[k] = 0;
  return {{"pid", pid},
          {"address", ""},
          {"neuron_runtime_tag", tag},
          {"error", ""},
          {"report",
           {{"neuroncore_counters",
             {{"period", period}, {"neuroncores_in_use", json::object()}, {"error", ""}}},
            {"execution_stats",
             {{"period", period},
              {"error_summary", zeros},
              {"execution_summary", exec_zeros},
              {"latency_stats", {{"total_latency", nullptr}, {"device_latency", nullptr}}},
              {"error", ""}}},
            {"memory_used",
             {{"period", period},
              {"neuron_runtime_used_bytes",
               {{"host", 0},
                {"neuron_device", 0},
                {"usage_breakdown",
                 {{"host", host_zeros}, {"neuroncore_memory_usage", json::object()}}}}},
              {"loaded_models", json::array()},
              {"error", ""}}}}}};
}

// What one datastore adds to its runtime's report. `before` is the previous document's snapshot
// (null for the first document); `period` the seconds between them.
struct RecordContext {
  const Snapshot& snap;
  const Snapshot* before;
  const DatastoreRecord& rec;
  const DatastoreRecord* rec_before;
  const RuntimeRecords* records;  // null: unknown (libnrt missing or refused them)
  int per_device;
  double period;

  // Counter `index` of logical core `slot`, from its physical cores' counter sets.
  uint64_t Core(int slot, int index) const {
    return LogicalCoreCounter(rec, slot, index, snap.lnc);
  }
  // The core counter's rise over the period; 0 without an earlier document.
  uint64_t CoreDelta(int slot, int index) const {
    return rec_before != nullptr
               ? Delta(Core(slot, index), LogicalCoreCounter(*rec_before, slot, index, snap.lnc))
               : uint64_t{0};
  }
};

// neuroncores_in_use of one held core: utilization in percent and FLOP/s over the period.
void AddCoreActivity(const RecordContext& c, int slot, const std::string& nc, json& in_use) {
  if (c.before == nullptr || c.period <= 0) return;
  const CoreActivity act = ActivityBetween(*c.before, c.snap, c.rec, slot);
  if (!act.utilization) return;  // a counter went down: unknown this period
  json core = {{"neuroncore_utilization", 100.0 * *act.utilization}};
  if (act.flops_per_s) core["flops"] = *act.flops_per_s;
  if (c.snap.lnc == 2) {
    // Each physical core of the pair from its own counter set.
    json v3d = json::object();
    const PhysicalRange pair = PhysicalCoresOf(slot, c.snap.lnc);
    for (int p = pair.first; p < pair.first + pair.count; ++p) {
      const std::optional<double> u =
          PhysicalActivityBetween(*c.before, c.snap, c.rec, p).utilization;
      if (u) v3d["nc_v3." + std::to_string(p)] = {{"neuroncore_utilization", 100.0 * *u}};
    }
    core["v3d"] = v3d;
  }
  in_use[nc] = core;
}

// Execution counts, device memory and, for the cores the process holds, per-core memory and
// activity.
void AddCores(const RecordContext& c, json& report) {
  json& in_use = report["neuroncore_counters"]["neuroncores_in_use"];
  json& exec = report["execution_stats"];
  json& mem = report["memory_used"]["neuron_runtime_used_bytes"];
  for (int slot = 0; slot < c.per_device && slot < nds::kMaxCores; ++slot) {
    for (const auto& [k, idx] : kErr) Add(exec["error_summary"][k], c.CoreDelta(slot, idx));
    for (const auto& [k, idx] : kExec) Add(exec["execution_summary"][k], c.CoreDelta(slot, idx));
    const uint64_t code = c.Core(slot, nds::kMemUsageCodeDevice);
    const uint64_t tensors = c.Core(slot, nds::kMemUsageTensorsDevice);
    const uint64_t constants = c.Core(slot, nds::kMemUsageConstantsDevice);
    const uint64_t scratch = c.Core(slot, nds::kMemUsageScratchpadDevice);
    const uint64_t misc = c.Core(slot, nds::kMemUsageMiscDevice);
    Add(mem["neuron_device"], code + tensors + constants + scratch + misc);
    if (!HoldsCore(c.rec, slot, c.snap.lnc)) continue;
    const std::string nc = std::to_string(GlobalCoreId(c.rec.device, slot, c.per_device));
    mem["usage_breakdown"]["neuroncore_memory_usage"][nc] = {{"constants", constants},
                                                             {"model_code", code},
                                                             {"model_shared_scratchpad", scratch},
                                                             {"runtime_memory", misc},
                                                             {"tensors", tensors}};
    AddCoreActivity(c, slot, nc, in_use);
  }
}

void AddHostAndModels(const RecordContext& c, json& report) {
  json& mem = report["memory_used"]["neuron_runtime_used_bytes"];
  for (const auto& [k, idx] : kHost) {
    Add(mem["usage_breakdown"]["host"][k], c.rec.device_counters[idx]);
    Add(mem["host"], c.rec.device_counters[idx]);
  }
  if (c.records == nullptr) {
    // Unknown, not none: no list, and the reason where neuron-monitor puts one.
    const SourceState& state = c.snap.runtime_records.state;
    const auto unread = state.unread.find(c.rec.device);
    std::string why = unread != state.unread.end() ? unread->second : state.reason;
    if (why.empty()) why = "runtime records not read";
    report["memory_used"].erase("loaded_models");
    report["memory_used"]["error"] = "loaded models unknown: " + why;
    return;
  }
  if (!report["memory_used"].contains("loaded_models")) return;  // unknown on another device
  for (const RuntimeModel& m : c.records->models) {
    report["memory_used"]["loaded_models"].push_back(
        {{"name", m.name},
         {"model_id", m.model_id},
         {"is_running", true},
         {"subgraphs",
          {{"sg_00",
            {{"neuroncore_index", GlobalCoreId(c.rec.device, m.nc_index, c.per_device)},
             {"neuron_device_index", c.rec.device}}}}}});
  }
}

// neuron_runtime_data: one entry per PID, merging its datastores on several devices; none while
// the datastores cannot be read (docs/architecture.md#unknown-is-not-zero), whatever a reader
// handed out.
json RuntimeData(const Snapshot& snap, const Snapshot* before, int per_device, double period) {
  std::map<int, json> runtimes;
  const std::span<const DatastoreRecord> records =
      DatastoresRead(snap) ? std::span<const DatastoreRecord>(snap.processes)
                           : std::span<const DatastoreRecord>();
  for (const DatastoreRecord& rec : records) {
    const RuntimeRecords* rr = snap.runtime_records.Find(rec.key());
    json& rt = runtimes[rec.pid];
    if (rt.is_null()) rt = EmptyRuntime(RuntimeTag(rr, rec.pid), rec.pid, period);
    const RecordContext c{snap, before,     rec,   FindRecord(before, rec.device, rec.pid),
                          rr,   per_device, period};
    AddCores(c, rt["report"]);
    AddHostAndModels(c, rt["report"]);
  }
  json out = json::array();
  for (auto& [pid, rt] : runtimes) out.push_back(std::move(rt));
  return out;
}

json HardwareCounters(const Snapshot& snap, double period) {
  json devices = json::array();
  for (const DeviceSample& d : snap.devices) {
    // The corrected-ECC files exist only on drivers that have them (none with public source);
    // 0 elsewhere, since consumers inc() these values (docs/metrics.md#json-stream).
    // neuron-monitor's keys, which happen to be the files' names; the uncorrected ones only when
    // read.
    json e = {{"neuron_device_index", d.index},
              {"mem_ecc_corrected", d.ecc_corrected.mem_ecc_corrected.value_or(0)},
              {"sram_ecc_corrected", d.ecc_corrected.sram_ecc_corrected.value_or(0)}};
    if (d.hardware.mem_ecc_uncorrected) e["mem_ecc_uncorrected"] = *d.hardware.mem_ecc_uncorrected;
    if (d.hardware.sram_ecc_uncorrected) {
      e["sram_ecc_uncorrected"] = *d.hardware.sram_ecc_uncorrected;
    }
    devices.push_back(e);
  }
  return {{"period", period}, {"neuron_devices", devices}, {"error", ""}};
}

json MemoryInfo(const ProcReader& proc, double period) {
  json meminfo = {{"period", period}, {"error", ""}};
  const absl::StatusOr<MemInfo> m = ReadMeminfo(proc);
  if (m.ok() && m->mem_total && m->MemUsed() && m->swap_total && m->SwapUsed()) {
    meminfo["memory_total_bytes"] = *m->mem_total;
    meminfo["memory_used_bytes"] = *m->MemUsed();
    meminfo["swap_total_bytes"] = *m->swap_total;
    meminfo["swap_used_bytes"] = *m->SwapUsed();
  } else {
    meminfo["error"] = "meminfo unavailable";
  }
  return meminfo;
}

// Percent of all CPU time since the previous document, per kind.
json VcpuUsage(const ProcReader& proc, double period, std::optional<SystemCpuTimes>* last) {
  const absl::StatusOr<SystemCpuTimes> cpu = proc.SystemCpu();
  json vcpu = {{"period", period}, {"usage_data", json::object()}, {"error", ""}};
  if (cpu.ok() && *last && cpu->TotalTicks() > (*last)->TotalTicks()) {
    const double total = static_cast<double>(cpu->TotalTicks() - (*last)->TotalTicks());
    const SystemCpuTimes& a = **last;
    auto pct = [&](uint64_t now, uint64_t before) {
      return 100.0 * static_cast<double>(Delta(now, before)) / total;
    };
    vcpu["average_usage"] = {
        {"user", pct(cpu->user, a.user)},          {"nice", pct(cpu->nice, a.nice)},
        {"system", pct(cpu->system, a.system)},    {"idle", pct(cpu->idle, a.idle)},
        {"io_wait", pct(cpu->iowait, a.iowait)},   {"irq", pct(cpu->irq, a.irq)},
        {"soft_irq", pct(cpu->softirq, a.softirq)}};
  } else if (!cpu.ok()) {
    vcpu["error"] = std::string{cpu.status().message()};
  }
  if (cpu.ok()) *last = *cpu;
  return vcpu;
}

json SystemData(const Snapshot& snap, const ProcReader& proc, double period,
                std::optional<SystemCpuTimes>* last_cpu) {
  return {{"neuron_hw_counters", HardwareCounters(snap, period)},
          {"vcpu_usage", VcpuUsage(proc, period, last_cpu)},
          {"memory_info", MemoryInfo(proc, period)}};
}

json InstanceInfo(const ExporterOptions& options, const Inventory& inv) {
  return {{"instance_name", options.instance_name},
          {"instance_id", inv.instance_id},
          {"instance_type", inv.instance_type},
          {"instance_availability_zone", options.availability_zone},
          {"instance_availability_zone_id", ""},
          {"instance_region", options.region},
          {"ami_id", ""},
          {"subnet_id", options.subnet_id},
          {"error", ""}};
}

json HardwareInfo(const Inventory& inv) {
  json hw = {{"neuron_device_count", inv.devices.size()},
             {"neuroncore_per_device_count", inv.LogicalCoresPerDevice()},
             {"logical_neuroncore_config", inv.lnc},
             {"error", ""}};
  // Ours, not neuron-monitor's: the driver module and the sysfs generation it is read as.
  hw["neuron_driver_version"] = inv.driver.version ? json(*inv.driver.version) : json();
  hw["neuron_driver_sysfs_generation"] = inv.driver.GenerationLabel();
  if (!inv.devices.empty()) {
    const NeuronDevice& d0 = inv.devices.front();
    hw["neuron_device_type"] = d0.device_name;
    if (d0.memory_bytes) hw["neuron_device_memory_size"] = *d0.memory_bytes;
  }
  return hw;
}

}  // namespace

JsonStream::JsonStream(ExporterState& source, ExporterOptions options)
    : source_(source), options_(std::move(options)) {}

std::string JsonStream::Next() {
  const ExporterView view = source_.Get();
  const Snapshot& snap = *view.current;
  // A document sharing its snapshot with the previous one (a period shorter than the sharing
  // window) is measured against the one before that, never over zero time.
  if (previous_ == view.current) previous_ = before_previous_;
  const Snapshot* prev = previous_.get();
  const Inventory& inv = *view.inventory;
  const double period =
      prev != nullptr ? std::chrono::duration<double>(snap.steady - prev->steady).count() : 0;

  json doc;
  doc["neuron_runtime_data"] = RuntimeData(snap, prev, inv.LogicalCoresPerDevice(), period);
  doc["system_data"] =
      SystemData(snap, ProcReader(RootPaths(source_.options().node.root)), period, &cpu_);
  doc["instance_info"] = InstanceInfo(options_, inv);
  doc["neuron_hardware_info"] = HardwareInfo(inv);
  if (previous_ != view.current) {
    before_previous_ = previous_;
    previous_ = view.current;
  }
  return doc.dump();
}

}  // namespace neuron::monitor
