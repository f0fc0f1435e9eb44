#include "tests/soak/soak_checks.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <optional>
#include <set>

#include "core/model/allocator.h"
#include "tests/soak/soak_node.h"
#include "tests/support/subprocess.h"

namespace neuron::soak {

namespace fs = std::filesystem;
using neuron::testing::ReadFile;

namespace {

std::optional<int64_t> ParseInt(std::string_view text) {
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr == text.data()) return std::nullopt;
  return v;
}

// The devices of a set of units (device indices, or global cores).
std::vector<int> DevicesOf(const std::vector<int>& ids, int cores_per_device, bool cores) {
  std::set<int> out;
  for (int id : ids) out.insert(cores ? id / cores_per_device : id);
  return {out.begin(), out.end()};
}

const char* const kEccFiles[3] = {"sram_ecc_uncorrected", "mem_ecc_uncorrected",
                                  "mem_ecc_repairable_uncorrected"};

// Each kmsg record's (seq, text); the file is "<prio>,<seq>,<usec>,-;<text>\n" per record.
std::vector<std::pair<int64_t, std::string>> KmsgRecords(const RootPaths& paths) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::ifstream in(paths.Kmsg());
  for (std::string line; std::getline(in, line);) {
    const size_t c1 = line.find(',');
    const size_t semi = line.find(';');
    if (c1 == std::string::npos || semi == std::string::npos) continue;
    const std::optional<int64_t> seq = ParseInt(std::string_view(line).substr(c1 + 1));
    if (seq) out.emplace_back(*seq, line.substr(semi + 1));
  }
  return out;
}

}  // namespace

std::vector<int> PodIds(const sim::AdmittedPod& pod, const std::string& resource) {
  std::vector<int> out;
  for (const sim::ContainerAllocation& c : pod.containers) {
    auto it = c.ids.find(resource);
    if (it == c.ids.end()) continue;
    for (const std::string& id : it->second) {
      if (std::optional<int64_t> v = ParseInt(id)) out.push_back(static_cast<int>(*v));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> DoubleBooked(const std::vector<sim::AdmittedPod>& pods,
                                      int cores_per_device) {
  std::map<int, std::vector<std::string>> owners;
  for (const sim::AdmittedPod& pod : pods) {
    const std::string who = pod.namespace_name + "/" + pod.name;
    std::set<int> cores;
    for (int d : PodIds(pod, kNeuron)) {
      for (int k = 0; k < cores_per_device; ++k) cores.insert(d * cores_per_device + k);
    }
    for (int c : PodIds(pod, kCore)) cores.insert(c);
    for (int c : cores) owners[c].push_back(who);
  }
  std::vector<std::string> out;
  for (const auto& [core, who] : owners) {
    if (who.size() < 2) continue;
    std::string line = "core " + std::to_string(core) + ":";
    for (const std::string& w : who) line += " " + w;
    out.push_back(line);
  }
  return out;
}

std::vector<int> FreeIds(const sim::ResourceState& state, const std::vector<sim::AdmittedPod>& pods,
                         const std::string& resource) {
  std::set<int> held;
  for (const sim::AdmittedPod& pod : pods) {
    for (int id : PodIds(pod, resource)) held.insert(id);
  }
  std::vector<int> out;
  for (const auto& [id, healthy] : state.devices) {
    const std::optional<int64_t> v = ParseInt(id);
    if (healthy && v && !held.contains(static_cast<int>(*v))) out.push_back(static_cast<int>(*v));
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool ContiguousConnected(const Topology& topology, int cores_per_device, std::vector<int> ids,
                         bool cores) {
  if (!Allocator::IsContiguous(ids)) return false;
  return topology.IsConnected(DevicesOf(ids, cores_per_device, cores));
}

bool ContiguousConnectedExists(const Topology& topology, int cores_per_device,
                               const std::vector<int>& free, int n, bool cores) {
  if (n <= 0) return false;
  const std::set<int> set(free.begin(), free.end());
  for (int start : free) {
    std::vector<int> range;
    for (int k = 0; k < n && set.contains(start + k); ++k) range.push_back(start + k);
    if (static_cast<int>(range.size()) == n &&
        topology.IsConnected(DevicesOf(range, cores_per_device, cores))) {
      return true;
    }
  }
  return false;
}

Baseline TakeBaseline(const RootPaths& paths, int devices) {
  Baseline b;
  for (int d = 0; d < devices; ++d) {
    std::array<uint64_t, 3> v{};
    for (int k = 0; k < 3; ++k) {
      const std::string text = ReadFile(paths.NeuronDevice(d) / "stats/hardware" / kEccFiles[k]);
      v[k] = static_cast<uint64_t>(ParseInt(text).value_or(0));
    }
    b.ecc.push_back(v);
  }
  for (const auto& [seq, text] : KmsgRecords(paths)) b.kmsg_seq = std::max(b.kmsg_seq, seq);
  return b;
}

HwTruth GroundTruth(const RootPaths& paths, int devices, const std::vector<std::string>& efas,
                    const Baseline& baseline) {
  HwTruth t;
  const Baseline now = TakeBaseline(paths, devices);
  std::set<int> hw_err;
  for (const auto& [seq, text] : KmsgRecords(paths)) {
    if (seq <= baseline.kmsg_seq || text.find("NEURON_HW_ERR=") == std::string::npos) continue;
    const size_t at = text.find(" nd-id=");
    if (at == std::string::npos) continue;
    if (std::optional<int64_t> d = ParseInt(std::string_view(text).substr(at + 7))) {
      hw_err.insert(static_cast<int>(*d));
    }
  }
  for (int d = 0; d < devices; ++d) {
    std::string reason;
    if (!fs::exists(paths.NeuronDevice(d))) {
      reason = "absent";
    } else if (std::string state = ReadFile(paths.NeuronDevice(d) / "reset"); state != "1\n") {
      reason = "state " + state.substr(0, state.find('\n'));
    } else if (now.ecc[d] != baseline.ecc[d]) {
      reason = "ecc";
    } else if (hw_err.contains(d)) {
      reason = "hw_err";
    }
    t.device_healthy.push_back(reason.empty());
    t.device_reason.push_back(reason);
  }
  for (const std::string& name : efas) {
    const fs::path dir = paths.InfinibandClassDir() / name;
    t.efa_healthy[name] =
        fs::exists(dir) && ReadFile(dir / "ports/1/state").find("ACTIVE") != std::string::npos;
  }
  return t;
}

HealthComparison CompareHealth(const HwTruth& truth, const sim::KubeletEmulator& kubelet,
                               int cores_per_device) {
  HealthComparison out;
  const std::vector<sim::AdmittedPod> pods = kubelet.Pods();
  std::set<int> whole, core_held;
  for (const sim::AdmittedPod& pod : pods) {
    for (int d : PodIds(pod, kNeuron)) whole.insert(d);
    for (int c : PodIds(pod, kCore)) core_held.insert(c / cores_per_device);
  }
  for (bool h : truth.device_healthy) out.unhealthy += h ? 0 : 1;
  for (const auto& [name, h] : truth.efa_healthy) out.unhealthy += h ? 0 : 1;

  auto check = [&](const std::string& resource, const std::string& id, bool hw, bool masked,
                   const std::string& why) {
    ++out.ids;
    if (masked) ++out.masked;
    const std::optional<sim::ResourceState> r = kubelet.Resource(resource);
    if (!r) {
      out.mismatches.push_back(resource + " not registered");
      return;
    }
    auto it = r->devices.find(id);
    const bool want = hw && !masked;
    if (it == r->devices.end()) {
      out.mismatches.push_back(resource + " " + id + ": not listed");
    } else if (it->second != want) {
      out.mismatches.push_back(
          resource + " " + id + ": kubelet sees " + (it->second ? "Healthy" : "Unhealthy") +
          ", truth " + (hw ? "healthy" : "unhealthy (" + why + ")") + (masked ? ", masked" : ""));
    }
  };
  for (int d = 0; d < static_cast<int>(truth.device_healthy.size()); ++d) {
    const bool hw = truth.device_healthy[d];
    check(kNeuron, std::to_string(d), hw, core_held.contains(d), truth.device_reason[d]);
    for (int k = 0; k < cores_per_device; ++k) {
      check(kCore, std::to_string(d * cores_per_device + k), hw, whole.contains(d),
            truth.device_reason[d]);
    }
  }
  for (const auto& [name, hw] : truth.efa_healthy) check(kEfa, name, hw, false, "down");
  return out;
}

}  // namespace neuron::soak
