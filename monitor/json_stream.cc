#include "monitor/json_stream.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>

#include "core/proc/procinfo.h"
#include "monitor/latency.h"

namespace neuron::monitor {
namespace {

using nlohmann::json;

const DatastoreRecord* FindRecord(const Snapshot* s, int device, int pid) {
  if (s == nullptr) return nullptr;
  for (const DatastoreRecord& r : s->processes) {
    if (r.device == device && r.pid == pid) return &r;
  }
  return nullptr;
}

uint64_t Delta(uint64_t now, uint64_t before) { return now >= before ? now - before : now; }

std::optional<uint64_t> Meminfo(const std::filesystem::path& proc, std::string_view key) {
  std::ifstream in(proc / "meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(std::string(key) + ":", 0) != 0) continue;
    std::istringstream ls(line.substr(key.size() + 1));
    uint64_t kb = 0;
    if (ls >> kb) return kb * 1024;
  }
  return std::nullopt;
}

}  // namespace

JsonStream::JsonStream(NodeSource& source, ExporterOptions options)
    : source_(source), options_(std::move(options)) {}

std::string JsonStream::Next() {
  const NodeView view = source_.Get();
  const Snapshot& snap = *view.current;
  // A document sharing its snapshot with the previous one (a period shorter than the sharing
  // window) is measured against the one before that, never over zero time.
  if (previous_ == view.current) previous_ = before_previous_;
  const Snapshot* prev = previous_.get();
  const Inventory& inv = *view.inventory;
  const int per_device = inv.LogicalCoresPerDevice();
  const double period =
      prev != nullptr ? std::chrono::duration<double>(snap.steady - prev->steady).count() : 0;

  // Runtimes: one entry per PID, merging its datastores on several devices; none while the
  // datastores cannot be read (DESIGN decision 19), whatever a reader handed out.
  std::map<int, json> runtimes;
  const std::span<const DatastoreRecord> records =
      DatastoresRead(snap) ? std::span<const DatastoreRecord>(snap.processes)
                           : std::span<const DatastoreRecord>();
  for (const DatastoreRecord& rec : records) {
    const DatastoreRecord* before = FindRecord(prev, rec.device, rec.pid);
    json& rt = runtimes[rec.pid];
    if (rt.is_null()) {
      rt = {{"pid", rec.pid},
            {"address", ""},
            {"neuron_runtime_tag", rec.Tag()},
            {"error", ""},
            {"report",
             {{"neuroncore_counters",
               {{"period", period}, {"neuroncores_in_use", json::object()}, {"error", ""}}},
              {"execution_stats",
               {{"period", period},
                {"error_summary",
                 {{"generic", 0},
                  {"numerical", 0},
                  {"transient", 0},
                  {"model", 0},
                  {"runtime", 0},
                  {"hardware", 0}}},
                {"execution_summary",
                 {{"completed", 0},
                  {"completed_with_err", 0},
                  {"completed_with_num_err", 0},
                  {"timed_out", 0},
                  {"incorrect_input", 0},
                  {"failed_to_queue", 0}}},
                {"latency_stats", {{"total_latency", nullptr}, {"device_latency", nullptr}}},
                {"error", ""}}},
              {"memory_used",
               {{"period", period},
                {"neuron_runtime_used_bytes",
                 {{"host", 0},
                  {"neuron_device", 0},
                  {"usage_breakdown",
                   {{"host",
                     {{"application_memory", 0},
                      {"constants", 0},
                      {"dma_buffers", 0},
                      {"tensors", 0}}},
                    {"neuroncore_memory_usage", json::object()}}}}},
                {"loaded_models", json::array()},
                {"error", ""}}}}}};
    }
    json& report = rt["report"];
    json& in_use = report["neuroncore_counters"]["neuroncores_in_use"];
    json& exec = report["execution_stats"];
    json& mem = report["memory_used"]["neuron_runtime_used_bytes"];
    auto add = [](json& j, uint64_t v) { j = j.get<uint64_t>() + v; };
    auto core = [&](int slot, int index) {
      const uint64_t now = rec.Core(slot, index);
      return before != nullptr ? Delta(now, before->Core(slot, index)) : uint64_t{0};
    };
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
    for (int slot = 0; slot < per_device && slot < nds::kMaxCores; ++slot) {
      for (const auto& [k, idx] : kErr) add(exec["error_summary"][k], core(slot, idx));
      for (const auto& [k, idx] : kExec) add(exec["execution_summary"][k], core(slot, idx));
      const uint64_t code = rec.Core(slot, nds::kMemUsageCodeDevice);
      const uint64_t tensors = rec.Core(slot, nds::kMemUsageTensorsDevice);
      const uint64_t constants = rec.Core(slot, nds::kMemUsageConstantsDevice);
      const uint64_t scratch = rec.Core(slot, nds::kMemUsageScratchpadDevice);
      const uint64_t misc = rec.Core(slot, nds::kMemUsageMiscDevice);
      const uint64_t total = code + tensors + constants + scratch + misc;
      add(mem["neuron_device"], total);
      const bool held = total > 0 || rec.Core(slot, nds::kTimeInUse) > 0;
      if (!held) continue;
      const std::string nc = std::to_string(rec.device * per_device + slot);
      mem["usage_breakdown"]["neuroncore_memory_usage"][nc] = {{"constants", constants},
                                                               {"model_code", code},
                                                               {"model_shared_scratchpad", scratch},
                                                               {"runtime_memory", misc},
                                                               {"tensors", tensors}};
      if (period > 0 && before != nullptr) {
        const double busy_s = static_cast<double>(core(slot, nds::kTimeInUse)) / 1e6;
        json c = {{"neuroncore_utilization", std::min(100.0, 100.0 * busy_s / period)},
                  {"flops", 2.0 * static_cast<double>(core(slot, nds::kMacCount)) / period}};
        if (snap.lnc == 2) {
          // Both physical cores of the pair run the logical core's work (driver-sim's model).
          json v3d = json::object();
          for (int p = 0; p < 2; ++p) {
            v3d["nc_v3." + std::to_string(slot * 2 + p)] = {
                {"neuroncore_utilization", c["neuroncore_utilization"]}};
          }
          c["v3d"] = v3d;
        }
        in_use[nc] = c;
      }
    }
    const std::pair<const char*, int> kHost[] = {{"application_memory", nds::kMemUsageCodeHost},
                                                 {"tensors", nds::kMemUsageTensorsHost},
                                                 {"constants", nds::kMemUsageConstantsHost},
                                                 {"dma_buffers", nds::kMemUsageScratchpadHost},
                                                 {"dma_buffers", nds::kMemUsageMiscHost}};
    for (const auto& [k, idx] : kHost) {
      add(mem["usage_breakdown"]["host"][k], rec.device_counters[idx]);
      add(mem["host"], rec.device_counters[idx]);
    }
    for (const DatastoreModel& m : rec.models) {
      report["memory_used"]["loaded_models"].push_back(
          {{"name", m.name},
           {"model_id", m.model_id},
           {"is_running", true},
           {"subgraphs",
            {{"sg_00",
              {{"neuroncore_index", rec.device * per_device + m.nc_index},
               {"neuron_device_index", rec.device}}}}}});
    }
    if (rec.histogram && rec.histogram->num_buckets > 0 && before != nullptr && before->histogram &&
        before->histogram->num_buckets == rec.histogram->num_buckets) {
      const int nb = rec.histogram->num_buckets;
      std::vector<uint64_t> counts(nb, 0);
      for (int slot = 0; slot < nds::kMaxCores; ++slot) {
        for (int b = 0; b < nb; ++b) {
          counts[b] += Delta(rec.histogram->counts[slot][b], before->histogram->counts[slot][b]);
        }
      }
      std::vector<uint64_t> bounds(rec.histogram->bounds_us.begin(),
                                   rec.histogram->bounds_us.begin() + (nb - 1));
      const auto pct = Percentiles(bounds, counts);
      if (!pct.empty()) {
        json lat = json::object();
        for (const auto& [k, v] : pct) lat[k] = v;
        exec["latency_stats"]["total_latency"] = lat;
      }
    }
  }

  json doc;
  doc["neuron_runtime_data"] = json::array();
  for (auto& [pid, rt] : runtimes) doc["neuron_runtime_data"].push_back(std::move(rt));

  json devices = json::array();
  for (const DeviceSample& d : snap.devices) {
    // No corrected-ECC source exists; 0 there, since consumers inc() these values (§4).
    json e = {
        {"neuron_device_index", d.index}, {"mem_ecc_corrected", 0}, {"sram_ecc_corrected", 0}};
    for (size_t i = 0; i < kHardwareCounters.size(); ++i) {
      if (kHardwareCounters[i] == "mem_ecc_uncorrected" && d.ecc[i]) {
        e["mem_ecc_uncorrected"] = *d.ecc[i];
      }
      if (kHardwareCounters[i] == "sram_ecc_uncorrected" && d.ecc[i]) {
        e["sram_ecc_uncorrected"] = *d.ecc[i];
      }
    }
    devices.push_back(e);
  }
  json& system = doc["system_data"];
  system["neuron_hw_counters"] = {{"period", period}, {"neuron_devices", devices}, {"error", ""}};
  ProcReader proc{RootPaths(source_.options().root)};
  absl::StatusOr<SystemCpuTimes> cpu = proc.SystemCpu();
  json vcpu = {{"period", period}, {"usage_data", json::object()}, {"error", ""}};
  if (cpu.ok() && cpu_ && cpu->TotalTicks() > cpu_->TotalTicks()) {
    const double total = static_cast<double>(cpu->TotalTicks() - cpu_->TotalTicks());
    auto pct = [&](uint64_t now, uint64_t before) {
      return 100.0 * static_cast<double>(Delta(now, before)) / total;
    };
    vcpu["average_usage"] = {
        {"user", pct(cpu->user, cpu_->user)},          {"nice", pct(cpu->nice, cpu_->nice)},
        {"system", pct(cpu->system, cpu_->system)},    {"idle", pct(cpu->idle, cpu_->idle)},
        {"io_wait", pct(cpu->iowait, cpu_->iowait)},   {"irq", pct(cpu->irq, cpu_->irq)},
        {"soft_irq", pct(cpu->softirq, cpu_->softirq)}};
  } else if (!cpu.ok()) {
    vcpu["error"] = std::string(cpu.status().message());
  }
  if (cpu.ok()) cpu_ = *cpu;
  system["vcpu_usage"] = vcpu;
  json meminfo = {{"period", period}, {"error", ""}};
  const auto mt = Meminfo(proc.proc_dir(), "MemTotal");
  const auto ma = Meminfo(proc.proc_dir(), "MemAvailable");
  const auto st = Meminfo(proc.proc_dir(), "SwapTotal");
  const auto sf = Meminfo(proc.proc_dir(), "SwapFree");
  if (mt && ma && st && sf) {
    meminfo["memory_total_bytes"] = *mt;
    meminfo["memory_used_bytes"] = *mt - std::min(*mt, *ma);
    meminfo["swap_total_bytes"] = *st;
    meminfo["swap_used_bytes"] = *st - std::min(*st, *sf);
  } else {
    meminfo["error"] = "meminfo unavailable";
  }
  system["memory_info"] = meminfo;

  doc["instance_info"] = {{"instance_name", options_.instance_name},
                          {"instance_id", inv.instance_id},
                          {"instance_type", inv.instance_type},
                          {"instance_availability_zone", options_.availability_zone},
                          {"instance_availability_zone_id", ""},
                          {"instance_region", options_.region},
                          {"ami_id", ""},
                          {"subnet_id", options_.subnet_id},
                          {"error", ""}};
  json hw = {{"neuron_device_count", inv.devices.size()},
             {"neuroncore_per_device_count", per_device},
             {"logical_neuroncore_config", inv.lnc},
             {"error", ""}};
  if (!inv.devices.empty()) {
    const NeuronDevice& d0 = inv.devices.front();
    hw["neuron_device_type"] = d0.device_name;
    if (d0.memory_bytes) hw["neuron_device_memory_size"] = *d0.memory_bytes;
  }
  doc["neuron_hardware_info"] = hw;
  if (previous_ != view.current) {
    before_previous_ = previous_;
    previous_ = view.current;
  }
  return doc.dump();
}

}  // namespace neuron::monitor
