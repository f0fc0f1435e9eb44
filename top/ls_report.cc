#include "top/ls_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/discovery/ultraserver.h"
#include "top/format.h"

namespace neuron::top {
namespace {

// COMMAND is cut to 40 characters, 80 with --wide (docs/tools-ux.md#ls-table-rules).
constexpr size_t kCommandWidth = 40;
constexpr size_t kWideCommandWidth = 80;

struct Header {
  std::string_view line1;
  std::string_view line2;
};

struct Table {
  std::vector<Header> headers;
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> rule_after;  // per row: a rule line follows it
};

std::string Centered(std::string_view word, size_t width) {
  const size_t len = DisplayWidth(word);
  const size_t left = (width - len) / 2;
  return std::string(left, ' ') + std::string(word) + std::string(width - len - left, ' ');
}

std::string RenderTable(const Table& t) {
  std::vector<size_t> width(t.headers.size());
  for (size_t c = 0; c < t.headers.size(); ++c) {
    width[c] = std::max(t.headers[c].line1.size(), t.headers[c].line2.size());
    for (const auto& row : t.rows) width[c] = std::max(width[c], DisplayWidth(row[c]));
    width[c] += 2;
  }
  std::string rule = "+";
  for (const size_t w : width) rule += std::string(w, '-') + "+";
  rule += "\n";
  std::string out = rule;
  for (const int line : {1, 2}) {
    out += "|";
    for (size_t c = 0; c < width.size(); ++c) {
      out += Centered(line == 1 ? t.headers[c].line1 : t.headers[c].line2, width[c]) + "|";
    }
    out += "\n";
  }
  out += rule;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    out += "|";
    for (size_t c = 0; c < width.size(); ++c) {
      const std::string& cell = t.rows[r][c];
      out += " " + cell + std::string(width[c] - 1 - DisplayWidth(cell), ' ') + "|";
    }
    out += "\n";
    if (t.rule_after[r] && r + 1 < t.rows.size()) out += rule;
  }
  out += rule;
  return out;
}

std::string OrNA(const std::string& s) { return s.empty() ? "NA" : s; }

std::string Memory(const LsDevice& d) { return d.memory_bytes ? FormatGiB(*d.memory_bytes) : "NA"; }

std::string Numa(const LsDevice& d) { return d.numa_node ? std::to_string(*d.numa_node) : "NA"; }

// "ultraserver: x4 node 2 server 0123456789abcdef, x2v node 0 server 0123456789abcdee" on a node
// in an UltraServer (docs/tools-ux.md#neuron-ls); nothing elsewhere.
std::string UltraServerLine(const LsReport& r) {
  const std::optional<UltraServerInfo>& us = r.inventory.ultraserver;
  if (!us || us->memberships.empty()) return "";
  std::vector<std::string> parts;
  for (const UltraServerMembership& m : us->memberships) {
    parts.push_back(fmt::format("{} node {} server {}", m.mode, m.node_id, m.server_id));
  }
  return fmt::format("ultraserver: {}\n", fmt::join(parts, ", "));
}

std::string HeaderLines(const LsReport& r) {
  std::string out = fmt::format("instance-type: {}\ninstance-id: {}\n", OrNA(r.instance_type),
                                OrNA(r.instance_id));
  if (r.lnc_applies) out += fmt::format("logical-neuroncore-config: {}\n", r.lnc);
  out += UltraServerLine(r);
  // Ours, after neuron-ls's own lines (docs/tools-ux.md#ls-options).
  out += fmt::format("driver-version: {}\n", OrNA(r.driver_version));
  if (!r.driver_problem.empty()) out += r.driver_problem + "\n";
  return out;
}

// Ours, after neuron-ls's columns (docs/tools-ux.md#health).
Table DefaultTable(const LsReport& r) {
  Table t;
  t.headers = {{"NEURON", "DEVICE"}, {"NEURON", "CORES"},      {"NEURON", "CORE IDS"},
               {"NEURON", "MEMORY"}, {"CONNECTED", "DEVICES"}, {"PCI", "BDF"},
               {"CPU", "AFFINITY"},  {"NUMA", "NODE"}};
  if (r.health.known) t.headers.push_back({"HEALTH", ""});
  for (const LsDevice& d : r.devices) {
    t.rows.push_back({std::to_string(d.index), std::to_string(d.cores), FormatRanges(d.core_ids),
                      Memory(d), JoinIds(d.connected), OrNA(d.bdf), OrNA(d.cpu_affinity), Numa(d)});
    if (r.health.known) t.rows.back().push_back(d.health ? HealthText(*d.health) : "NA");
    t.rule_after.push_back(false);
  }
  return t;
}

Table ProcessTable(const LsReport& r, bool wide, bool rule_per_device) {
  Table t;
  t.headers = {{"NEURON", "DEVICE"},     {"NEURON", "CORES"},   {"NEURON", "MEMORY"},
               {"CONNECTED", "DEVICES"}, {"PCI", "BDF"},        {"PID", ""},
               {"COMMAND", ""},          {"RUNTIME", "VERSION"}};
  const size_t cut = wide ? kWideCommandWidth : kCommandWidth;
  for (const LsDevice& d : r.devices) {
    std::vector<std::string> lead{std::to_string(d.index), std::to_string(d.cores), Memory(d),
                                  JoinIds(d.connected), d.bdf.empty() ? "NA" : ShortBdf(d.bdf)};
    if (d.processes.empty()) {
      lead.insert(lead.end(), {"NA", "NA", "NA"});
      t.rows.push_back(lead);
      t.rule_after.push_back(rule_per_device);
      continue;
    }
    for (size_t i = 0; i < d.processes.size(); ++i) {
      const LsProcess& p = d.processes[i];
      std::vector<std::string> row =
          i == 0 ? lead : std::vector<std::string>(lead.size(), std::string());
      row.insert(row.end(),
                 {std::to_string(p.pid), TruncateEllipsis(p.command, cut), p.runtime_version});
      t.rows.push_back(row);
      t.rule_after.push_back(rule_per_device && i + 1 == d.processes.size());
    }
  }
  return t;
}

Table TopologyTable(const LsReport& r) {
  Table t;
  t.headers = {{"NEURON", "DEVICE"},
               {"NEURON", "CORES"},
               {"NEURON", "MEMORY"},
               {"CONNECTED", "DEVICES"},
               {"PCI", "BDF"}};
  for (const LsDevice& d : r.devices) {
    t.rows.push_back({std::to_string(d.index), std::to_string(d.cores), Memory(d),
                      JoinIds(d.connected), d.bdf.empty() ? "NA" : ShortBdf(d.bdf)});
    t.rule_after.push_back(false);
  }
  return t;
}

// Command lines by PID, each read at most once.
class Commands {
 public:
  explicit Commands(const ProcReader* proc) : proc_(proc) {}
  const std::string& Of(int pid) {
    auto [it, inserted] = lines_.try_emplace(pid, "NA");
    if (inserted && proc_ != nullptr) {
      absl::StatusOr<std::string> line = proc_->CommandLine(pid);
      if (line.ok() && !line->empty()) it->second = TerminalSafe(*line);
    }
    return it->second;
  }

 private:
  const ProcReader* proc_;
  std::map<int, std::string> lines_;
};

// -a: for each device (inventory order) the PIDs holding it, without `self`.
std::vector<std::set<int>> DeviceHolders(const LsSources& src, std::vector<std::string>* notes) {
  std::vector<std::set<int>> out(src.device_numbers.size());
  if (!src.all_processes || src.proc == nullptr) return out;
  std::vector<dev_t> numbers;
  for (size_t i = 0; i < src.device_numbers.size(); ++i) {
    if (src.device_numbers[i].ok()) {
      numbers.push_back(*src.device_numbers[i]);
    } else {
      notes->push_back(fmt::format("cannot tell which processes hold neuron{}: {}",
                                   src.inventory->devices[i].index,
                                   std::string{src.device_numbers[i].status().message()}));
    }
  }
  const ProcReader::DeviceHolders holders = src.proc->HoldersOf(numbers);
  for (size_t i = 0; i < src.device_numbers.size(); ++i) {
    if (!src.device_numbers[i].ok()) continue;
    const auto it = holders.pids.find(*src.device_numbers[i]);
    if (it == holders.pids.end()) continue;
    for (const int pid : it->second) {
      if (pid != src.self_pid) out[i].insert(pid);
    }
  }
  if (std::optional<std::string> why = src.proc->MissesProcesses()) {
    notes->push_back(fmt::format(
        "{}: processes outside it that hold a device without a runtime datastore are not listed",
        *why));
  }
  if (holders.problems.processes > 0) {
    notes->push_back(fmt::format(
        "cannot see the open files of {} processes ({}): processes of other users that hold a "
        "device without a runtime datastore are not listed; root sees them all",
        holders.problems.processes, holders.problems.first));
  }
  return out;
}

LsDevice DeviceRowOf(const Inventory& inv, const NeuronDevice& nd, const LinkLayout& link) {
  LsDevice d;
  d.index = nd.index;
  d.cores = inv.LogicalCoresPerDevice();
  d.core_ids = inv.CoreIds(nd.index);
  d.memory_bytes = nd.memory_bytes;
  d.connected = DisplayNeighbours(nd, link);
  d.bdf = nd.bdf;
  d.cpu_affinity = nd.cpulist;
  d.numa_node = nd.numa_node;
  d.attributes = nd.attributes;
  return d;
}

}  // namespace

LsReport BuildLsReport(const LsSources& src) {
  const Inventory& inv = *src.inventory;
  LsReport r;
  r.instance_type = inv.instance_type;
  r.instance_id = inv.instance_id;
  r.lnc = inv.lnc;
  r.driver_version = inv.driver.version.value_or("");
  r.driver_problem = DriverLayoutProblem(inv);
  if (const InstanceSpec* spec = inv.Spec()) {
    r.lnc_applies = spec->lnc_configurable;
  } else {
    r.lnc_applies = std::any_of(inv.devices.begin(), inv.devices.end(),
                                [](const NeuronDevice& d) { return d.device_name == "Trainium2"; });
  }
  r.link = DetectLinkShape(inv);
  r.inventory = inv;
  r.live_data_unavailable = src.live_data_unavailable;
  if (src.health != nullptr) r.health = *src.health;

  Commands commands(src.proc);
  const std::vector<std::set<int>> holders = DeviceHolders(src, &r.notes);
  for (size_t i = 0; i < inv.devices.size(); ++i) {
    LsDevice d = DeviceRowOf(inv, inv.devices[i], r.link);
    std::set<int> seen;
    if (src.datastores != nullptr) {
      for (const DatastoreRecord& rec : *src.datastores) {
        if (rec.device != d.index || !seen.insert(rec.pid).second) continue;
        const RuntimeRecords* rr =
            src.runtime_records != nullptr ? src.runtime_records->Find(rec.key()) : nullptr;
        d.processes.push_back({rec.pid, commands.Of(rec.pid), RuntimeVersion(rr)});
      }
    }
    std::sort(d.processes.begin(), d.processes.end(),
              [](const LsProcess& a, const LsProcess& b) { return a.pid < b.pid; });
    if (i < holders.size()) {
      for (const int pid : holders[i]) {
        if (!seen.contains(pid)) d.processes.push_back({pid, commands.Of(pid), "NA"});
      }
    }
    d.processes_known = !src.live_data_unavailable || src.all_processes;
    if (const HealthRow* h = r.health.FindDevice(d.index)) d.health = *h;
    r.devices.push_back(std::move(d));
  }
  return r;
}

std::vector<absl::StatusOr<dev_t>> DeviceNumbers(const Inventory& inv, const RootPaths& root) {
  std::vector<absl::StatusOr<dev_t>> out;
  for (const NeuronDevice& d : inv.devices) out.push_back(NeuronDeviceNumber(root, d.index));
  return out;
}

std::string RenderLsText(const LsReport& r, LsFormat format) {
  std::string out = HeaderLines(r);
  switch (format) {
    case LsFormat::kDefault:
      return out + RenderTable(DefaultTable(r));
    case LsFormat::kWide:
      return out + RenderTable(ProcessTable(r, /*wide=*/true, /*rule_per_device=*/false));
    case LsFormat::kAllProcs:
      return out + RenderTable(ProcessTable(r, /*wide=*/false, /*rule_per_device=*/true));
    case LsFormat::kWideAllProcs:
      return out + RenderTable(ProcessTable(r, /*wide=*/true, /*rule_per_device=*/true));
    case LsFormat::kTopology:
      // Two empty lines between the table and the drawing, as the trn2 sample has.
      return out + RenderTable(TopologyTable(r)) + "\n\n" + DrawTopology(r.inventory, r.link);
  }
  return out;
}

namespace {

// An absent string value: null, not "" (docs/architecture.md#unknown-is-not-zero).
nlohmann::ordered_json StringOrNull(const std::string& s) {
  return s.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(s);
}

// A device's verdict in --json-output: where it comes from, and null when the verdicts do not
// name the device.
nlohmann::ordered_json HealthJson(const LsReport& r, const LsDevice& d) {
  if (!d.health) return nlohmann::ordered_json();
  nlohmann::ordered_json j;
  j["state"] = HealthStateName(d.health->state);
  nlohmann::ordered_json components = nlohmann::ordered_json::array();
  for (HealthComponent c : d.health->components.List()) {
    components.push_back(HealthComponentName(c));
  }
  j["components"] = std::move(components);
  j["reasons"] = d.health->reasons;
  j["degraded"] = d.health->degraded;
  if (!d.health->withheld.empty()) j["withheld"] = d.health->withheld;
  j["source"] = r.health.from_agent ? "agent" : "this read only";
  return j;
}

// The published attributes (core/driver/device_attributes.h) under their keys; null when
// unreadable, the key always there. A kInt row's value is a number.
void AttributesJson(const DeviceAttributes& attributes, nlohmann::ordered_json* j) {
  for (size_t i = 0; i < kDeviceAttributes.size(); ++i) {
    const DeviceAttributeSpec& spec = kDeviceAttributes[i];
    const std::optional<std::string>& v = attributes.values()[i];
    nlohmann::ordered_json& out = (*j)[spec.key];  // null unless set below
    if (spec.type == AttributeType::kString && v) {
      out = *v;
    } else if (const std::optional<int64_t> n = attributes.AsInt(i)) {
      out = *n;
    }
  }
}

// The -j objects, one per device (docs/tools-ux.md#ls-json); `attributes` adds the published
// attributes, which --output-format json shows and -j's unchanged array does not.
nlohmann::ordered_json DevicesJson(const LsReport& r, bool attributes) {
  nlohmann::ordered_json devices = nlohmann::ordered_json::array();
  for (const LsDevice& d : r.devices) {
    nlohmann::ordered_json j;
    j["neuron_device"] = d.index;
    j["bdf"] = d.bdf.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(ShortBdf(d.bdf));
    j["cpu_affinity"] = StringOrNull(d.cpu_affinity);
    // A string in neuron-ls's output (docs/tools-ux.md#ls-json).
    j["numa_node"] = d.numa_node ? nlohmann::ordered_json(std::to_string(*d.numa_node))
                                 : nlohmann::ordered_json();
    j["connected_to"] = d.connected;
    j["nc_count"] = d.cores;
    j["logical_neuroncore_config"] = r.lnc;
    j["memory_size"] =
        d.memory_bytes ? nlohmann::ordered_json(*d.memory_bytes) : nlohmann::ordered_json();
    j["neuroncore_ids"] = d.core_ids;
    nlohmann::ordered_json procs = nlohmann::ordered_json::array();
    for (const LsProcess& p : d.processes) {
      nlohmann::ordered_json pj;
      pj["pid"] = p.pid;
      pj["command"] = TruncateEllipsis(p.command, kCommandWidth);
      pj["neuron_runtime_version"] = p.runtime_version;
      procs.push_back(std::move(pj));
    }
    j["neuron_processes"] = d.processes_known ? std::move(procs) : nlohmann::ordered_json();
    // Only when it applies, so the document keeps neuron-ls's fields otherwise
    // (docs/tools-ux.md#ls-json).
    if (r.live_data_unavailable) j["live_data_unavailable"] = *r.live_data_unavailable;
    if (!r.driver_problem.empty()) j["driver_problem"] = r.driver_problem;
    j["driver_version"] = StringOrNull(r.driver_version);
    if (attributes) AttributesJson(d.attributes, &j);
    if (r.health.known) j["health"] = HealthJson(r, d);
    devices.push_back(std::move(j));
  }
  return devices;
}

// The node's place in its UltraServer (docs/tools-ux.md#ls-json-object); null when the driver
// publishes none, which says nothing about a place, rather than an empty one.
nlohmann::ordered_json UltraServerJson(const LsReport& r) {
  const std::optional<UltraServerInfo>& us = r.inventory.ultraserver;
  if (!us) return nlohmann::ordered_json();
  nlohmann::ordered_json modes = nlohmann::ordered_json::array();
  for (const int mode : us->supported_modes) {
    // A mode a newer driver adds keeps its number rather than vanishing.
    const std::string name = UltraServerModeName(mode);
    modes.push_back(name.empty() ? std::to_string(mode) : name);
  }
  nlohmann::ordered_json memberships = nlohmann::ordered_json::array();
  for (const UltraServerMembership& m : us->memberships) {
    nlohmann::ordered_json mj;
    mj["mode"] = m.mode;
    mj["node_id"] = m.node_id;
    mj["server_id"] = m.server_id;
    memberships.push_back(std::move(mj));
  }
  nlohmann::ordered_json j;
  j["supported_modes"] = std::move(modes);
  j["memberships"] = std::move(memberships);
  return j;
}

// Command lines may hold invalid UTF-8; replace rather than throw.
std::string Dump(const nlohmann::ordered_json& j) {
  return j.dump(4, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace

std::string RenderLsJson(const LsReport& r) { return Dump(DevicesJson(r, false)); }

std::string RenderLsJsonObject(const LsReport& r) {
  nlohmann::ordered_json j;
  j["instance_type"] = StringOrNull(r.instance_type);
  j["instance_id"] = StringOrNull(r.instance_id);
  j["logical_neuroncore_config"] = r.lnc;
  j["driver_version"] = StringOrNull(r.driver_version);
  j["ultraserver"] = UltraServerJson(r);
  j["neuron_devices"] = DevicesJson(r, true);
  return Dump(j);
}

}  // namespace neuron::top
