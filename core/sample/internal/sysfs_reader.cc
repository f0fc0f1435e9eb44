#include "core/sample/internal/sysfs_reader.h"

#include <fmt/format.h>

#include <charconv>

namespace neuron::sysfs_reader {
namespace {

using counter_files::DirHandle;
using counter_files::ReadResult;

constexpr const std::array<std::string_view, 3>& kTriple = sysfs::kCounterFields;

// Every relative name, built once, so a sweep allocates nothing per file.
struct Names {
  std::array<std::array<std::string, 2>, kStatusCounters.size()> status;  // "<name>/total"
  std::array<std::array<std::string, 2>, kOtherInfo.size()> other_info;
  std::array<std::string, 3> device_mem;     // "device_mem/total"
  std::array<std::string, 3> core_host_mem;  // "host_mem/total"
  std::array<std::array<std::string, 3>, kDeviceMemCategories.size()> device_mem_cat;
  std::array<std::array<std::string, 3>, kHostMemCategories.size()> host_mem_cat;
  std::array<std::string, kHardwareCounters.size()> hardware;  // "hardware/<name>"
  std::array<std::string, kHealthStatusFiles.size()> health_status;
  std::array<std::string, kEccCorrected.size()> ecc_corrected;
  std::array<std::string, kEfaPortCounters.size()> efa_port;  // "hw_counters/<name>"
  std::array<std::string, kEfaDeviceCounters.size()> efa_device;
  std::string power;      // "power/utilization"
  std::string power_raw;  // "power/utilization_raw"
  std::string port_state, port_phys_state, port_rate;
};

const Names& N() {
  static const Names* names = [] {
    auto* n = new Names;
    for (size_t i = 0; i < kStatusCounters.size(); ++i) {
      for (int f = 0; f < 2; ++f) {
        n->status[i][f] = fmt::format("{}/{}", kStatusCounters[i].sysfs, kTriple[f]);
      }
    }
    for (size_t i = 0; i < kOtherInfo.size(); ++i) {
      for (int f = 0; f < 2; ++f) {
        n->other_info[i][f] = fmt::format("{}/{}", kOtherInfo[i], kTriple[f]);
      }
    }
    for (int f = 0; f < 3; ++f) {
      n->device_mem[f] = fmt::format("{}/{}", sysfs::part::kDeviceMem, kTriple[f]);
      n->core_host_mem[f] = fmt::format("{}/{}", sysfs::part::kHostMem, kTriple[f]);
      for (size_t c = 0; c < kDeviceMemCategories.size(); ++c) {
        n->device_mem_cat[c][f] =
            fmt::format("{}/{}/{}", sysfs::part::kDeviceMem, kDeviceMemCategories[c], kTriple[f]);
      }
      for (size_t c = 0; c < kHostMemCategories.size(); ++c) {
        n->host_mem_cat[c][f] =
            fmt::format("{}/{}/{}/{}", sysfs::part::kMemoryUsage, sysfs::part::kHostMem,
                        kHostMemCategories[c], kTriple[f]);
      }
    }
    for (size_t i = 0; i < kHardwareCounters.size(); ++i) {
      n->hardware[i] = fmt::format("{}/{}", sysfs::part::kHardware, kHardwareCounters[i]);
    }
    for (size_t i = 0; i < kHealthStatusFiles.size(); ++i) {
      n->health_status[i] = fmt::format("{}/{}/{}", sysfs::part::kHardware,
                                        sysfs::part::kHealthStatus, kHealthStatusFiles[i]);
    }
    for (size_t i = 0; i < kEccCorrected.size(); ++i) {
      n->ecc_corrected[i] = fmt::format("{}/{}", sysfs::part::kHardware, kEccCorrected[i]);
    }
    for (size_t i = 0; i < kEfaPortCounters.size(); ++i) {
      n->efa_port[i] = fmt::format("{}/{}", sysfs::part::kHwCounters, kEfaPortCounters[i]);
    }
    for (size_t i = 0; i < kEfaDeviceCounters.size(); ++i) {
      n->efa_device[i] = fmt::format("{}/{}", sysfs::kHwCountersDir, kEfaDeviceCounters[i]);
    }
    n->power = fmt::format("{}/{}", sysfs::part::kPower, sysfs::part::kUtilization);
    n->power_raw = fmt::format("{}/{}", sysfs::part::kPower, sysfs::part::kUtilizationRaw);
    n->port_state = std::string(sysfs::part::kState);
    n->port_phys_state = std::string(sysfs::part::kPhysState);
    n->port_rate = std::string(sysfs::part::kRate);
    return n;
  }();
  return *names;
}

// Reads one file: the text on success; nullopt when missing (silently) or unreadable (error).
struct Text {
  char buf[counter_files::kMaxFileBytes];
  size_t len = 0;
  std::string_view view() const { return {buf, len}; }
};

bool ReadText(DirHandle& dir, const std::string& name, ReadContext& ctx, Text* t) {
  int err = 0;
  switch (dir.Read(name.c_str(), t->buf, sizeof(t->buf), &t->len, &err, ctx.sweep)) {
    case ReadResult::kOk:
      return true;
    case ReadResult::kMissing:
      return false;
    case ReadResult::kError:
      ctx.errors->AddErrno(dir, name.c_str(), err);
      return false;
  }
  return false;
}

std::optional<uint64_t> ReadCounter(DirHandle& dir, const std::string& name, ReadContext& ctx) {
  Text t;
  if (!ReadText(dir, name, ctx, &t)) return std::nullopt;
  std::optional<uint64_t> v = counter_files::ParseCounter(t.view());
  if (!v) {
    ctx.errors->Add(dir, name.c_str(),
                    fmt::format("malformed value {} (expected an unsigned integer)",
                                counter_files::Shown(t.view())));
  }
  return v;
}

void ReadMem(DirHandle& dir, const std::array<std::string, 3>& names, ReadContext& ctx,
             MemCounter* m) {
  m->total = ReadCounter(dir, names[0], ctx);
  m->present = ReadCounter(dir, names[1], ctx);
  m->peak = ReadCounter(dir, names[2], ctx);
}

void ReadPair(DirHandle& dir, const std::array<std::string, 2>& names, ReadContext& ctx,
              CounterPair* p) {
  p->total = ReadCounter(dir, names[0], ctx);
  p->present = ReadCounter(dir, names[1], ctx);
}

// The fields of `out` whose row in the list is of `sweep`; `names` and `sweeps` are the list's,
// in the order of Counters::Members().
template <typename Counters, size_t N>
void ReadCounters(DirHandle& dir, const std::array<std::string, N>& names,
                  const std::array<Sweep, N>& sweeps, Sweep sweep, ReadContext& ctx,
                  Counters* out) {
  static_assert(Counters::Members().size() == N);
  for (size_t i = 0; i < N; ++i) {
    if (sweeps[i] == sweep) out->*Counters::Members()[i] = ReadCounter(dir, names[i], ctx);
  }
}

// "xrow_grp,mm_active,wl_active,idle\n" then "%d,%llu,%llu,%llu\n" per row group. The driver
// formats into 256 bytes, so a last row cut short without its newline is dropped, not an error.
std::optional<std::vector<PeCounterRow>> ParsePe(std::string_view text) {
  constexpr std::string_view kHeader = "xrow_grp,mm_active,wl_active,idle\n";
  if (!text.starts_with(kHeader)) return std::nullopt;
  text.remove_prefix(kHeader.size());
  std::vector<PeCounterRow> rows;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    if (nl == std::string_view::npos) {
      if (kHeader.size() + text.size() >= 255) break;  // truncated by the driver's buffer
      return std::nullopt;
    }
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    PeCounterRow r;
    const char* p = line.data();
    const char* end = line.data() + line.size();
    auto field = [&](auto* out, bool last) {
      auto [q, ec] = std::from_chars(p, end, *out);
      if (ec != std::errc() || (last ? q != end : (q == end || *q != ','))) return false;
      p = last ? q : q + 1;
      return true;
    };
    if (!field(&r.row_group, false) || !field(&r.mm_active, false) || !field(&r.wl_active, false) ||
        !field(&r.idle, true)) {
      return std::nullopt;
    }
    rows.push_back(r);
  }
  return rows;
}

PowerStatus ToPowerStatus(std::string_view s, bool* ok) {
  *ok = true;
  if (s == "POWER_STATUS_VALID") return PowerStatus::kValid;
  if (s == "POWER_STATUS_NO_DATA") return PowerStatus::kNoData;
  if (s == "POWER_STATUS_INVALID") return PowerStatus::kInvalid;
  *ok = false;
  return PowerStatus::kInvalid;
}

}  // namespace

DeviceReader::DeviceReader(const RootPaths& root, int index, int physical_cores, NodeGroups groups)
    : index_(index), groups_(groups) {
  const std::filesystem::path dev = root.NeuronDevice(index);
  dev_ = DirHandle(dev.string());
  stats_ = DirHandle((dev / sysfs::part::kStats).string());
  cores_.reserve(physical_cores);
  for (int c = 0; c < physical_cores; ++c) {
    const std::filesystem::path core = dev / sysfs::CoreDir(c);
    cores_.push_back(CoreDirs{DirHandle((core / sysfs::kStatusDir).string()),
                              DirHandle((core / sysfs::kMemoryUsageDir).string()),
                              DirHandle((core / sysfs::kOtherInfoDir).string()),
                              DirHandle((core / sysfs::kTensorEngineDir).string())});
  }
}

DeviceSample DeviceReader::Empty() const {
  DeviceSample d;
  d.index = index_;
  d.cores.resize(cores_.size());
  for (size_t c = 0; c < cores_.size(); ++c) d.cores[c].physical_index = static_cast<int>(c);
  return d;
}

bool DeviceReader::ReadHot(DeviceSample* d, ReadContext& ctx) {
  const Names& n = N();
  static const std::string kReset(sysfs::kReset);
  Text t;
  d->state.reset();
  if (ReadText(dev_, kReset, ctx, &t)) {
    d->state = counter_files::ParseState(t.view());
    if (!d->state) {
      ctx.errors->Add(
          dev_, kReset.c_str(),
          fmt::format("malformed value {} (expected 0, 1 or 2)", counter_files::Shown(t.view())));
    }
  } else if (dev_.gone()) {
    return false;
  }
  ReadCounters(stats_, n.hardware, kHardwareSweeps, Sweep::kHot, ctx, &d->hardware);
  ReadGroups(d, Sweep::kHot, ctx);
  for (size_t c = 0; c < kHostMemCategories.size(); ++c) {
    d->host_mem[c].total = ReadCounter(stats_, n.host_mem_cat[c][0], ctx);
  }
  for (size_t c = 0; c < cores_.size(); ++c) {
    d->cores[c].device_mem.total = ReadCounter(cores_[c].memory, n.device_mem[0], ctx);
    d->cores[c].host_mem.total = ReadCounter(cores_[c].memory, n.core_host_mem[0], ctx);
  }
  return true;
}

bool DeviceReader::ReadFull(DeviceSample* d, ReadContext& ctx) {
  const Names& n = N();
  if (!ReadHot(d, ctx)) return false;
  static const std::string kSerial(sysfs::kSerialNumber);
  static const std::string kPe(sysfs::part::kPeCounters);
  const std::string& kPower = n.power;
  Text t;
  d->serial_number.reset();
  if (ReadText(dev_, kSerial, ctx, &t)) {
    const std::string_view v = t.view().substr(0, t.view().find('\n'));
    if (!v.empty()) d->serial_number = std::string(v);  // "\n": the firmware read failed
  }
  d->power.reset();
  if (ReadText(stats_, kPower, ctx, &t)) {
    std::optional<counter_files::ParsedPower> p = counter_files::ParsePower(t.view());
    bool ok = false;
    const PowerStatus status = p ? ToPowerStatus(p->status, &ok) : PowerStatus::kInvalid;
    if (p && ok) {
      d->power =
          PowerReading{status, p->epoch, p->min_bp / 100.0, p->max_bp / 100.0, p->avg_bp / 100.0};
    } else {
      ctx.errors->Add(stats_, kPower.c_str(),
                      fmt::format("malformed value {} (expected "
                                  "<status>,<epoch>,<min>,<max>,<avg>)",
                                  counter_files::Shown(t.view())));
    }
  }
  for (size_t c = 0; c < kHostMemCategories.size(); ++c) {
    d->host_mem[c].present = ReadCounter(stats_, n.host_mem_cat[c][1], ctx);
    d->host_mem[c].peak = ReadCounter(stats_, n.host_mem_cat[c][2], ctx);
  }
  ReadCounters(stats_, n.hardware, kHardwareSweeps, Sweep::kFull, ctx, &d->hardware);
  ReadGroups(d, Sweep::kFull, ctx);
  for (size_t c = 0; c < cores_.size(); ++c) {
    CoreDirs& dirs = cores_[c];
    CoreSample& core = d->cores[c];
    for (size_t i = 0; i < kStatusCounters.size(); ++i) {
      ReadPair(dirs.status, n.status[i], ctx, &core.status[i]);
    }
    core.device_mem.present = ReadCounter(dirs.memory, n.device_mem[1], ctx);
    core.device_mem.peak = ReadCounter(dirs.memory, n.device_mem[2], ctx);
    core.host_mem.present = ReadCounter(dirs.memory, n.core_host_mem[1], ctx);
    core.host_mem.peak = ReadCounter(dirs.memory, n.core_host_mem[2], ctx);
    for (size_t k = 0; k < kDeviceMemCategories.size(); ++k) {
      ReadMem(dirs.memory, n.device_mem_cat[k], ctx, &core.device_mem_by_category[k]);
    }
    for (size_t i = 0; i < kOtherInfo.size(); ++i) {
      ReadPair(dirs.other_info, n.other_info[i], ctx,
               &(core.other_info.*OtherInfoCounters::Members()[i]));
    }
    core.pe_counters.reset();
    if (ReadText(dirs.tensor_engine, kPe, ctx, &t)) {
      core.pe_counters = ParsePe(t.view());
      if (!core.pe_counters) {
        ctx.errors->Add(dirs.tensor_engine, kPe.c_str(),
                        fmt::format("malformed value {} (expected the "
                                    "xrow_grp,mm_active,wl_active,idle table)",
                                    counter_files::Shown(t.view())));
      }
    }
  }
  return true;
}

// Only the groups the device's tree holds: a generation without them costs no failed open, and
// their fields stay absent.
void DeviceReader::ReadGroups(DeviceSample* d, Sweep sweep, ReadContext& ctx) {
  const Names& n = N();
  if (groups_.Has(NodeGroup::kHealthStatus)) {
    ReadCounters(stats_, n.health_status, kHealthStatusSweeps, sweep, ctx, &d->health_status);
  } else {
    d->health_status = {};
  }
  if (groups_.Has(NodeGroup::kEccCorrected)) {
    ReadCounters(stats_, n.ecc_corrected, kEccCorrectedSweeps, sweep, ctx, &d->ecc_corrected);
  } else {
    d->ecc_corrected = {};
  }
  if (sweep != Sweep::kFull) return;
  d->power_raw.reset();
  Text t;
  if (groups_.Has(NodeGroup::kUtilizationRaw) && ReadText(stats_, n.power_raw, ctx, &t)) {
    d->power_raw = counter_files::ParsePowerRaw(t.view());
    if (!d->power_raw) {
      ctx.errors->Add(stats_, n.power_raw.c_str(),
                      fmt::format("malformed value {} (expected die,util_bips,counter rows)",
                                  counter_files::Shown(t.view())));
    }
  }
}

void DeviceReader::ReadExitCounters(DeviceSample* d, ReadContext& ctx) {
  const Names& n = N();
  for (size_t c = 0; c < cores_.size(); ++c) {
    for (size_t i = 0; i < kStatusCounters.size(); ++i) {
      d->cores[c].status[i].total = ReadCounter(cores_[c].status, n.status[i][0], ctx);
    }
    for (size_t i = 0; i < kOtherInfo.size(); ++i) {
      (d->cores[c].other_info.*OtherInfoCounters::Members()[i]).total =
          ReadCounter(cores_[c].other_info, n.other_info[i][0], ctx);
    }
  }
}

EfaReader::EfaReader(const RootPaths& root, std::string name) : name_(std::move(name)) {
  const std::filesystem::path dir = root.InfinibandClassDir() / name_;
  ibdev_ = DirHandle(dir.string());
  port_ = DirHandle((dir / sysfs::kPortDir).string());
}

bool EfaReader::Read(EfaSample* e, ReadContext& ctx) {
  const Names& n = N();
  const std::string& kState = n.port_state;
  const std::string& kPhys = n.port_phys_state;
  const std::string& kRate = n.port_rate;
  *e = EfaSample{};
  e->name = name_;
  Text t;
  if (ReadText(port_, kState, ctx, &t)) {
    if (auto s = counter_files::ParseNumberedState(t.view())) {
      e->port_state = s->first;
      e->port_state_name = std::string(s->second);
    } else {
      ctx.errors->Add(port_, kState.c_str(),
                      fmt::format("malformed value {} (expected \"<n>: <NAME>\")",
                                  counter_files::Shown(t.view())));
    }
  } else if (port_.gone()) {
    return false;
  }
  if (ReadText(port_, kPhys, ctx, &t)) {
    if (auto s = counter_files::ParseNumberedState(t.view())) {
      e->phys_state = s->first;
      e->phys_state_name = std::string(s->second);
    } else {
      ctx.errors->Add(port_, kPhys.c_str(),
                      fmt::format("malformed value {} (expected \"<n>: <Name>\")",
                                  counter_files::Shown(t.view())));
    }
  }
  if (ReadText(port_, kRate, ctx, &t)) {
    const std::string_view v = t.view().substr(0, t.view().find('\n'));
    e->rate = std::string(v);
    e->rate_gbps = counter_files::ParseRateGbps(v);
    if (!e->rate_gbps) {
      ctx.errors->Add(port_, kRate.c_str(),
                      fmt::format("malformed value {} (expected \"<n> Gb/sec ...\")",
                                  counter_files::Shown(t.view())));
    }
  }
  ReadCounters(port_, n.efa_port, kEfaPortSweeps, Sweep::kFull, ctx, &e->port_counters);
  ReadCounters(ibdev_, n.efa_device, kEfaDeviceSweeps, Sweep::kFull, ctx, &e->device_counters);
  return true;
}

int FullFileCount(int physical_cores, NodeGroups groups) {
  int device = 1 /*reset*/ + 1 /*serial*/ + static_cast<int>(kHardwareCounters.size()) +
               1 /*power*/ + 3 * static_cast<int>(kHostMemCategories.size());
  for (int i = 0; i < kNodeGroupCount; ++i) {
    const auto g = static_cast<NodeGroup>(i);
    if (groups.Has(g) && kReadGroups.Has(g)) device += static_cast<int>(GroupDeviceFiles(g).size());
  }
  const int core = 2 * static_cast<int>(kStatusCounters.size()) + 3 + 3 +
                   3 * static_cast<int>(kDeviceMemCategories.size()) +
                   2 * static_cast<int>(kOtherInfo.size()) + 1 /*pe_cntrs*/;
  return device + physical_cores * core;
}

int EfaFileCount() {
  return 3 + static_cast<int>(kEfaPortCounters.size() + kEfaDeviceCounters.size());
}

}  // namespace neuron::sysfs_reader
