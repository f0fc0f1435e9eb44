// BuildView: from two snapshots to what neuron-top shows (docs/tools-ux.md#top-data).

#include "top/view_model.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "core/driver/datastore_layout.h"
#include "core/model/core_ids.h"
#include "core/sample/process_usage.h"
#include "top/format.h"

namespace neuron::top {
namespace {

// Sums present values; absent only when nothing was present (partial data is normal).
struct Acc {
  std::optional<uint64_t> value;
  void Add(std::optional<uint64_t> v) {
    if (v) value = value.value_or(0) + *v;
  }
};

template <size_t N>
int IndexOf(const std::array<std::string_view, N>& names, std::string_view name) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == name) return static_cast<int>(i);
  }
  return -1;
}

// sysfs device_mem/<devcat> index of each neuron-top category.
const std::array<int, kDeviceCategoryCount>& SysfsCategoryIndex() {
  static const std::array<int, kDeviceCategoryCount> idx = [] {
    std::array<int, kDeviceCategoryCount> out{};
    for (int c = 0; c < kDeviceCategoryCount; ++c) {
      out[c] = IndexOf(kDeviceMemCategories, kDeviceCategoryKeys[c]);
    }
    return out;
  }();
  return idx;
}

// Datastore core counter of each category (docs/driver-interface.md#core-counter-indices,
// #sysfs-names allocation types).
constexpr std::array<int, kDeviceCategoryCount> kNdsCategoryCounter{
    nds::kMemUsageTensorsDevice, nds::kMemUsageConstantsDevice, nds::kMemUsageCodeDevice,
    nds::kMemUsageMiscDevice, nds::kMemUsageScratchpadDevice};
// Model node memory slot of each category (0 CODE, 1 TENSORS, 2 CONSTANTS, 3 SCRATCHPAD, 4 MISC).
constexpr std::array<int, kDeviceCategoryCount> kModelSlot{1, 2, 0, 4, 3};

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

std::string NcVersion(const Inventory& inv, int lnc) {
  std::string arch;
  for (const NeuronDevice& d : inv.devices) {
    if (!d.nc_arch_type.empty()) {
      arch = d.nc_arch_type;
      break;
    }
  }
  if (arch.size() > 2 && arch.starts_with("NC")) arch = arch.substr(2);
  std::transform(arch.begin(), arch.end(), arch.begin(), [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  });
  if (arch == "v3" && lnc == 2) arch += "d";
  return arch;
}

CpuUsage SystemCpu(const ProcSample* a, const ProcSample* b) {
  if (a == nullptr || b == nullptr || !a->system || !b->system) return {};
  const uint64_t total_a = a->system->TotalTicks();
  const uint64_t total_b = b->system->TotalTicks();
  if (total_b <= total_a) return {};
  const double dt = static_cast<double>(total_b - total_a);
  auto frac = [dt](uint64_t x, uint64_t y) -> std::optional<double> {
    if (y < x) return std::nullopt;
    return std::clamp(static_cast<double>(y - x) / dt, 0.0, 1.0);
  };
  return {frac(a->system->UserTicks(), b->system->UserTicks()),
          frac(a->system->SystemTicks(), b->system->SystemTicks())};
}

// CPU ticks of `pid` between the two samples: {user, system}; absent when the PID was not seen
// in both or was reused (start time changed).
std::optional<std::pair<uint64_t, uint64_t>> ProcessTicks(const ProcSample* a, const ProcSample* b,
                                                          int pid) {
  if (a == nullptr || b == nullptr) return std::nullopt;
  const auto ia = a->processes.find(pid);
  const auto ib = b->processes.find(pid);
  if (ia == a->processes.end() || ib == b->processes.end()) return std::nullopt;
  const ProcessStat& x = ia->second;
  const ProcessStat& y = ib->second;
  if (x.start_time != y.start_time || y.utime < x.utime || y.stime < x.stime) return std::nullopt;
  return std::make_pair(y.utime - x.utime, y.stime - x.stime);
}

CpuUsage RuntimeCpu(const ViewInputs& in, const std::vector<int>& pids) {
  const ProcSample* a = in.proc_before;
  const ProcSample* b = in.proc_after;
  if (a == nullptr || b == nullptr || !b->system || b->system->cpus <= 0) return {};
  const double capacity = Seconds(b->at - a->at) * static_cast<double>(in.ticks_per_second) *
                          static_cast<double>(b->system->cpus);
  if (capacity <= 0) return {};
  uint64_t user = 0;
  uint64_t sys = 0;
  bool any = false;
  for (const int pid : pids) {
    if (auto t = ProcessTicks(a, b, pid)) {
      user += t->first;
      sys += t->second;
      any = true;
    }
  }
  if (!any) return {};
  return {std::clamp(static_cast<double>(user) / capacity, 0.0, 1.0),
          std::clamp(static_cast<double>(sys) / capacity, 0.0, 1.0)};
}

std::optional<double> Mean(const std::vector<std::optional<double>>& xs) {
  double sum = 0;
  int n = 0;
  for (const auto& x : xs) {
    if (x) {
      sum += *x;
      ++n;
    }
  }
  if (n == 0) return std::nullopt;
  return sum / n;
}

// Why the runtimes' models and tags are not shown, for the status lines; "" when they could be
// read (or no records reader is configured). Unknown, not none
// (docs/architecture.md#unknown-is-not-zero).
std::string RecordsProblem(const Snapshot& snap) {
  const SourceState& s = snap.runtime_records.state;
  if (!s.known || s.up) return "";
  return "models and process tags unknown: " + s.reason;
}

ModelMemory ModelOf(const RuntimeModel& m, int pid) {
  ModelMemory out;
  out.model_id = m.model_id;
  out.name = m.name;
  out.pid = pid;
  uint64_t device = 0;
  uint64_t host = 0;
  for (int s = 0; s < 5; ++s) {
    device += m.memory[RuntimeModel::kLocationDevice][s].total_size;
    host += m.memory[RuntimeModel::kLocationHost][s].total_size;
  }
  out.device_bytes = device;
  out.host_bytes = host;
  for (int c = 0; c < kDeviceCategoryCount; ++c) {
    out.categories[c] = m.memory[RuntimeModel::kLocationDevice][kModelSlot[c]].total_size;
  }
  return out;
}

HostMemory HostFromRecords(const std::vector<const DatastoreRecord*>& records) {
  HostMemory h;
  uint64_t total = 0;
  uint64_t tensors = 0;
  uint64_t constants = 0;
  uint64_t dma = 0;
  uint64_t app = 0;
  for (const DatastoreRecord* r : records) {
    const auto& dc = r->device_counters;
    dma += dc[nds::kMemUsageCodeHost];
    tensors += dc[nds::kMemUsageTensorsHost];
    constants += dc[nds::kMemUsageConstantsHost];
    app += dc[nds::kMemUsageMiscHost];
    total += dc[nds::kMemUsageCodeHost] + dc[nds::kMemUsageTensorsHost] +
             dc[nds::kMemUsageConstantsHost] + dc[nds::kMemUsageScratchpadHost] +
             dc[nds::kMemUsageMiscHost];
  }
  h.total = total;
  h.tensors = tensors;
  h.constants = constants;
  h.dma_buffers = dma;
  h.app_memory = app;
  return h;
}

// What the "all" tab adds up over devices.
struct AllTotals {
  Acc host_total, host_tensors, host_constants, host_dma, host_app, dev_total;
  std::array<Acc, kDeviceCategoryCount> dev_cat;
  std::vector<std::optional<double>> utils;
  std::optional<double> flops_sum;
};

// Whether a snapshot saw the runtimes' live counters. Without them its busy and FLOP totals
// lack every running process's share, so rates over it would read as idle
// (docs/architecture.md#unknown-is-not-zero).
bool LiveRead(const Snapshot* s) {
  return s != nullptr && s->datastore_source.known && s->datastore_source.up;
}

DeviceRow AllGridRow(const ViewInputs& in, const DeviceSample& d, AllTotals* t) {
  const Snapshot& after = *in.after;
  const Snapshot* before = in.before;
  const bool rates = LiveRead(before) && LiveRead(&after);
  const double dt = before != nullptr ? Seconds(after.steady - before->steady) : 0;
  DeviceRow row;
  row.index = d.index;
  row.state = d.state;
  Acc ecc;
  ForEachCounter(d.hardware, kHardwareCounters,
                 [&](std::string_view, const std::optional<uint64_t>& e) { ecc.Add(e); });
  row.ecc_errors = ecc.value;
  const std::vector<LogicalCoreTotals> now = LogicalCores(after, d);
  const DeviceSample* prev_dev = before != nullptr ? before->FindDevice(d.index) : nullptr;
  const std::vector<LogicalCoreTotals> prev =
      prev_dev != nullptr ? LogicalCores(*before, *prev_dev) : std::vector<LogicalCoreTotals>();
  const int cpd = static_cast<int>(now.size());
  for (int k = 0; k < cpd; ++k) {
    CoreCell cell;
    cell.core_id = GlobalCoreId(d.index, k, cpd);
    if (rates) cell.utilization = Utilization(*before, after, d.index, k);
    if (rates && k < static_cast<int>(prev.size()) && prev[k].flops && now[k].flops && dt > 0 &&
        *now[k].flops >= *prev[k].flops) {
      cell.flops_per_s = static_cast<double>(*now[k].flops - *prev[k].flops) / dt;
      t->flops_sum = t->flops_sum.value_or(0) + *cell.flops_per_s;
    }
    t->utils.push_back(cell.utilization);
    row.cores.push_back(cell);
  }
  return row;
}

// One device's node of the memory tree from sysfs (the driver's view of every process), with
// the datastores' model records under their cores.
DeviceMemoryNode AllMemoryNode(const Snapshot& after, const DeviceSample& d, int cpd,
                               AllTotals* t) {
  DeviceMemoryNode node;
  node.index = d.index;
  Acc node_dev;
  for (int k = 0; k < cpd; ++k) {
    CoreMemory cm;
    cm.local_index = k;
    const PhysicalRange r = PhysicalCoresOf(k, after.lnc);
    Acc cdev, chost;
    std::array<Acc, kDeviceCategoryCount> ccat;
    for (int p = r.first; p < r.first + r.count && p < static_cast<int>(d.cores.size()); ++p) {
      const CoreSample& c = d.cores[p];
      cdev.Add(c.device_mem.total);
      chost.Add(c.host_mem.total);
      for (int cat = 0; cat < kDeviceCategoryCount; ++cat) {
        const int si = SysfsCategoryIndex()[cat];
        if (si >= 0) ccat[cat].Add(c.device_mem_by_category[si].total);
      }
    }
    cm.device_bytes = cdev.value;
    cm.host_bytes = chost.value;
    for (int cat = 0; cat < kDeviceCategoryCount; ++cat) {
      cm.categories[cat] = ccat[cat].value;
      t->dev_cat[cat].Add(ccat[cat].value);
    }
    node_dev.Add(cdev.value);
    t->dev_total.Add(cdev.value);
    for (const RuntimeRecords& rec : after.runtime_records.records) {
      if (rec.device != d.index) continue;
      for (const RuntimeModel& m : rec.models) {
        if (m.nc_index == k) cm.models.push_back(ModelOf(m, rec.pid));
      }
    }
    node.cores.push_back(std::move(cm));
  }
  Acc dev_host_all;
  for (const MemCounter& m : d.host_mem) dev_host_all.Add(m.total);
  node.host_bytes = dev_host_all.value;
  node.device_bytes = node_dev.value;
  return node;
}

AppView BuildAll(const ViewInputs& in, const std::vector<int>& pids) {
  static const int dma = IndexOf(kHostMemCategories, "dma_buffers");
  static const int tensors = IndexOf(kHostMemCategories, "tensors");
  static const int constants = IndexOf(kHostMemCategories, "constants");
  static const int appmem = IndexOf(kHostMemCategories, "application_memory");
  AppView app;
  app.label = "all";
  AllTotals t;
  for (const DeviceSample& d : in.after->devices) {
    app.grid.push_back(AllGridRow(in, d, &t));
    const int cpd = static_cast<int>(app.grid.back().cores.size());
    app.memory_tree.push_back(AllMemoryNode(*in.after, d, cpd, &t));
    t.host_total.Add(app.memory_tree.back().host_bytes);
    if (dma >= 0) t.host_dma.Add(d.host_mem[dma].total);
    if (tensors >= 0) t.host_tensors.Add(d.host_mem[tensors].total);
    if (constants >= 0) t.host_constants.Add(d.host_mem[constants].total);
    if (appmem >= 0) t.host_app.Add(d.host_mem[appmem].total);
  }
  app.average_utilization = Mean(t.utils);
  app.total_flops_per_s = t.flops_sum;
  app.runtime_cpu = RuntimeCpu(in, pids);
  app.host = {t.host_total.value, t.host_tensors.value, t.host_constants.value, t.host_dma.value,
              t.host_app.value};
  app.device.total = t.dev_total.value;
  for (int c = 0; c < kDeviceCategoryCount; ++c) app.device.categories[c] = t.dev_cat[c].value;
  return app;
}

// What a process's tab adds up over its cores.
struct ProcessTotals {
  std::vector<std::optional<double>> utils;
  std::optional<double> flops_sum;
};

// One device's row of a process's tab: its activity on each core, 0 on a device it does not
// use; the cores it holds count towards its averages.
DeviceRow ProcessGridRow(const ViewInputs& in, const DeviceSample& d, int pid, int cpd,
                         const std::vector<int>& held, ProcessTotals* t) {
  const Snapshot& after = *in.after;
  const Snapshot* before = in.before;
  const bool rates = before != nullptr && after.steady > before->steady;
  const DatastoreRecord* now = FindRecord(&after, d.index, pid);
  DeviceRow row;
  row.index = d.index;
  row.state = d.state;
  for (int k = 0; k < cpd; ++k) {
    CoreCell cell;
    cell.core_id = GlobalCoreId(d.index, k, cpd);
    if (rates && now == nullptr) {
      cell.utilization = 0.0;  // the process does not use this device
      cell.flops_per_s = 0.0;
    } else if (rates) {
      const CoreActivity act = ActivityBetween(*before, after, *now, k);
      cell.utilization = act.utilization;
      cell.flops_per_s = act.flops_per_s;
    }
    if (std::find(held.begin(), held.end(), k) != held.end()) {
      t->utils.push_back(cell.utilization);
      if (cell.flops_per_s) t->flops_sum = t->flops_sum.value_or(0) + *cell.flops_per_s;
    }
    row.cores.push_back(cell);
  }
  return row;
}

// A process's node of the memory tree for one device: the cores it holds, by category, with
// its models under them.
DeviceMemoryNode ProcessMemoryNode(const DatastoreRecord& now, const RuntimeRecords* records,
                                   const std::vector<int>& held, int pid, int lnc) {
  DeviceMemoryNode node;
  node.index = now.device;
  uint64_t node_dev = 0;
  for (const int k : held) {
    CoreMemory cm;
    cm.local_index = k;
    uint64_t sum = 0;
    for (int c = 0; c < kDeviceCategoryCount; ++c) {
      cm.categories[c] = LogicalCoreCounter(now, k, kNdsCategoryCounter[c], lnc);
      sum += *cm.categories[c];
    }
    cm.device_bytes = sum;
    node_dev += sum;
    for (size_t i = 0; records != nullptr && i < records->models.size(); ++i) {
      if (records->models[i].nc_index == k) cm.models.push_back(ModelOf(records->models[i], pid));
    }
    node.cores.push_back(std::move(cm));
  }
  node.device_bytes = node_dev;
  node.host_bytes = HostFromRecords({&now}).total;
  return node;
}

// Device memory of a process's tab: the sum of its memory tree, every category present.
DeviceMemory ProcessDeviceMemory(const std::vector<DeviceMemoryNode>& tree) {
  DeviceMemory out;
  uint64_t total = 0;
  CategoryBytes cats{};
  for (auto& c : cats) c = 0;
  for (const DeviceMemoryNode& n : tree) {
    for (const CoreMemory& c : n.cores) {
      for (int k = 0; k < kDeviceCategoryCount; ++k) {
        *cats[k] += c.categories[k].value_or(0);
        total += c.categories[k].value_or(0);
      }
    }
  }
  out.total = total;
  out.categories = cats;
  return out;
}

// A process's tab, from its datastores only.
AppView BuildProcess(const ViewInputs& in, int pid, int cpd) {
  const Snapshot& after = *in.after;
  const std::vector<const DatastoreRecord*> records = RecordsOf(after, pid);
  AppView app;
  app.pid = pid;
  // The tag is the workload's own text: shown with visible escapes, whatever its source did.
  app.label = TerminalSafe(RuntimeTag(
      records.empty() ? nullptr : after.runtime_records.Find(records.front()->key()), pid));
  ProcessTotals t;
  for (const DeviceSample& d : after.devices) {
    const DatastoreRecord* now = FindRecord(&after, d.index, pid);
    const std::vector<int> held =
        now != nullptr ? CoreSlotsHeld(*now, cpd, after.lnc) : std::vector<int>();
    app.grid.push_back(ProcessGridRow(in, d, pid, cpd, held, &t));
    if (now != nullptr) {
      app.memory_tree.push_back(
          ProcessMemoryNode(*now, after.runtime_records.Find(now->key()), held, pid, after.lnc));
    }
  }
  app.average_utilization = Mean(t.utils);
  app.total_flops_per_s = t.flops_sum;
  app.runtime_cpu = RuntimeCpu(in, {pid});
  app.host = HostFromRecords(records);
  app.device = ProcessDeviceMemory(app.memory_tree);
  return app;
}

// The process table's row of `pid`, from its tab and its records.
ProcessRow RowOf(const ViewInputs& in, int pid, const AppView& app) {
  ProcessRow row;
  row.pid = pid;
  const std::vector<const DatastoreRecord*> records = RecordsOf(*in.after, pid);
  row.tag = app.label;
  for (const DatastoreRecord* r : records) row.devices.push_back(r->device);
  row.runtime_version = RuntimeVersion(
      records.empty() ? nullptr : in.after->runtime_records.Find(records.front()->key()));
  row.device_bytes = app.device.total;
  row.host_bytes = app.host.total;
  // What the driver says the process has allocated (GET_ALL_APPS_INFO) is the figure a real
  // node guarantees; the datastore's counters are the runtime's own account.
  const bool driver_says =
      !records.empty() && std::all_of(records.begin(), records.end(), [](const DatastoreRecord* r) {
        return r->driver.has_value();
      });
  if (driver_says) {
    row.device_bytes = 0;
    row.host_bytes = 0;
    for (const DatastoreRecord* r : records) {
      *row.device_bytes += r->driver->device_mem_bytes;
      *row.host_bytes += r->driver->host_mem_bytes;
    }
  }
  row.utilization = app.average_utilization;
  if (in.details != nullptr) {
    if (const auto it = in.details->find(pid); it != in.details->end()) {
      row.command = it->second.command;
      row.pod = it->second.pod;
      row.pod_known = it->second.pod_known;
    }
  }
  if (in.proc_before != nullptr && in.proc_after != nullptr) {
    const double dt = Seconds(in.proc_after->at - in.proc_before->at);
    if (auto t = ProcessTicks(in.proc_before, in.proc_after, pid); t && dt > 0) {
      row.cpu = static_cast<double>(t->first + t->second) /
                (dt * static_cast<double>(in.ticks_per_second));
    }
  }
  return row;
}

}  // namespace

std::string LiveDataProblem(const SourceState& source) {
  if (!source.known) return "the Neuron driver has not answered yet";
  if (source.up) return "";
  return source.reason.empty() ? "the Neuron driver's device files cannot be read" : source.reason;
}

std::vector<int> RuntimePids(const Snapshot& snap) {
  std::set<int> pids;
  for (const DatastoreRecord& r : snap.processes) pids.insert(r.pid);
  return {pids.begin(), pids.end()};
}

TopView BuildView(const ViewInputs& in) {
  const Inventory& inv = *in.inventory;
  const Snapshot& after = *in.after;
  TopView v;
  v.generation = after.generation;
  v.wall = after.wall;
  v.interval_s = in.before != nullptr ? Seconds(after.steady - in.before->steady) : 0;
  v.instance_type = inv.instance_type;
  v.instance_id = inv.instance_id;
  v.lnc = after.lnc;
  v.nc_version = NcVersion(inv, after.lnc);
  v.cores_per_device = inv.LogicalCoresPerDevice();
  if (const InstanceSpec* spec = inv.Spec(); spec != nullptr && spec->chip != nullptr) {
    v.peak_flops_per_core = spec->chip->peak_bf16_flops * std::max(1, after.lnc);
  }
  v.datastore_source = after.datastore_source;
  v.runtime_records = after.runtime_records.state;
  if (LiveRead(&after)) v.runtime_attached = !after.processes.empty();
  // An unknown sysfs layout or missing nodes first (docs/driver-interface.md#detection).
  if (std::string p = DriverLayoutProblem(inv); !p.empty()) v.notes.push_back(std::move(p));
  if (in.notes != nullptr) v.notes.insert(v.notes.end(), in.notes->begin(), in.notes->end());
  if (const std::string why = RecordsProblem(after); !why.empty()) v.notes.push_back(why);
  v.system_cpu = SystemCpu(in.proc_before, in.proc_after);
  v.errors = after.errors;
  Acc capacity;
  for (const DeviceSample& d : after.devices) {
    if (const NeuronDevice* nd = inv.FindDevice(d.index)) capacity.Add(nd->memory_bytes);
  }
  v.device_memory_capacity = capacity.value;

  const std::vector<int> pids = RuntimePids(after);
  v.apps.push_back(BuildAll(in, pids));
  for (const int pid : pids) {
    AppView app = BuildProcess(in, pid, v.cores_per_device);
    ProcessRow row = RowOf(in, pid, app);
    row.core_ids = CoresHeldBy(after, pid, v.cores_per_device);
    v.processes.push_back(std::move(row));
    v.apps.push_back(std::move(app));
  }
  return v;
}

}  // namespace neuron::top
