#include "core/driver/driver_generations.h"

#include <algorithm>
#include <array>
#include <charconv>

#include "core/driver/device_attributes.h"
#include "core/driver/health_counters.h"
#include "core/driver/sysfs_names.h"

namespace neuron {
namespace {

using G = NodeGroup;

// docs/driver-interface.md#driver-generations gives each row's source lines. 2.24 to 2.26 hold
// the same tree; the three groups of 2.27 and 2.28 the agent does not read.
constexpr NodeGroups k227{G::kFwApiVersion, G::kPlatformClassAttrs};
constexpr NodeGroups k228 = k227 | NodeGroups{G::kFwBuild, G::kReadableTopology, G::kHealthStatus};
constexpr NodeGroups k229 = k228 | NodeGroups{G::kUtilizationRaw};
// From the 2.30.2 release notes alone (no source): where the notes do not say, the files are
// assumed to sit beside their kin (corrected ECC in stats/hardware/, the two health files in
// health_status/).
constexpr NodeGroups k230 = k229 | NodeGroups{G::kEccCorrected, G::kHealthComponents};

constexpr std::array<DriverGeneration, 7> kGenerations{{
    {"2.24", "2.24.7.0", {}},
    {"2.25", "2.25.4.0", {}},
    {"2.26", "2.26.5.0", {}},
    {"2.27", "2.27.4.0", k227},
    {"2.28", "2.28.0.0", k228},
    {"2.29", "2.29.0.0", k229},
    {"2.30", "2.30.2.0", k230, /*from_source=*/false},
}};

// info/architecture/instance_type of the chips whose hardware layer sets health_status_enabled:
// v3 (Trn2) and v4 (Trn3); v2 (Trn1, Inf2) does not.
constexpr std::array<std::string_view, 2> kHealthStatusChips{"Trn2", "Trn3"};

// dir/name as std::filesystem::path's operator/ makes it for these relative names, without its
// parse of every component: a scan of a trn2.48xlarge builds ~13,500 paths here (ReadDeviceFiles),
// and the path arithmetic was a tenth of neuron-ls's CPU.
std::string Join(std::string_view dir, std::string_view name) {
  std::string out;
  out.reserve(dir.size() + 1 + name.size());
  out.append(dir);
  if (!out.empty() && out.back() != '/') out.push_back('/');
  out.append(name);
  return out;
}

}  // namespace

std::span<const DriverGeneration> KnownGenerations() { return kGenerations; }

const DriverGeneration& NewestGeneration() { return kGenerations.back(); }

const DriverGeneration& NewestSourcedGeneration() {
  const auto it = std::find_if(kGenerations.rbegin(), kGenerations.rend(),
                               [](const DriverGeneration& g) { return g.from_source; });
  return *it;
}

const DriverGeneration* GenerationNamed(std::string_view name) {
  for (const DriverGeneration& g : kGenerations) {
    if (g.name == name) return &g;
  }
  return nullptr;
}

const DriverGeneration* GenerationOfVersion(std::string_view version) {
  // "<major>.<minor>.<patch>.<build>": only the first two decide; digits each.
  const size_t first = version.find('.');
  if (first == std::string_view::npos) return nullptr;
  const size_t second = version.find('.', first + 1);
  const std::string_view name = version.substr(0, second);
  for (std::string_view part : {name.substr(0, first), name.substr(first + 1)}) {
    int n = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), n);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size()) return nullptr;
  }
  return GenerationNamed(name);
}

bool GroupOnChip(NodeGroup group, std::string_view chip) {
  if (group != G::kHealthStatus && group != G::kHealthComponents) return true;
  return std::find(kHealthStatusChips.begin(), kHealthStatusChips.end(), chip) !=
         kHealthStatusChips.end();
}

NodeGroups GroupsOnChip(NodeGroups groups, std::string_view chip) {
  NodeGroups out;
  for (int i = 0; i < kNodeGroupCount; ++i) {
    const auto g = static_cast<NodeGroup>(i);
    if (groups.Has(g) && GroupOnChip(g, chip)) out.Add(g);
  }
  return out;
}

std::span<const std::string> GroupDeviceFiles(NodeGroup group) {
  static const auto* files = [] {
    auto* f = new std::array<std::vector<std::string>, kNodeGroupCount>;
    (*f)[static_cast<int>(G::kFwApiVersion)] = {std::string(sysfs::kFwApiVersion)};
    (*f)[static_cast<int>(G::kFwBuild)] = {std::string(sysfs::kFwBuild)};
    for (std::string_view name : kHealthStatusFiles) {
      (*f)[static_cast<int>(G::kHealthStatus)].push_back(Join(sysfs::kHealthStatusDir, name));
    }
    (*f)[static_cast<int>(G::kUtilizationRaw)] = {std::string(sysfs::kPowerUtilizationRaw)};
    (*f)[static_cast<int>(G::kHealthComponents)] = {std::string(sysfs::kUnhealthyComponents),
                                                    std::string(sysfs::kHealthcheckHeartbeat)};
    // And each health counter row's file in its group (core/driver/health_counters.h), so that a
    // row of a new group is expected where its generation has the group.
    for (const HealthCounter& c : kHealthCounters) {
      if (!c.group) continue;
      std::vector<std::string>& files = (*f)[static_cast<int>(*c.group)];
      const std::string path = Join(c.dir, c.name);
      if (std::find(files.begin(), files.end(), path) == files.end()) files.push_back(path);
    }
    return f;
  }();
  return (*files)[static_cast<int>(group)];
}

std::vector<std::string> ReadDeviceFiles(NodeGroups groups, int physical_cores) {
  std::vector<std::string> out;
  for (std::string_view f : {sysfs::kReset, sysfs::kCoreCount, sysfs::kConnectedDevices}) {
    out.emplace_back(f);
  }
  for (const DeviceAttributeSpec& a : kDeviceAttributes) {
    if (a.every_generation) out.emplace_back(a.file);
  }
  for (std::string_view f :
       {sysfs::kArchType, sysfs::kInstanceType, sysfs::kDeviceName, sysfs::kPowerUtilization}) {
    out.emplace_back(f);
  }
  for (std::string_view hw : kHardwareCounters) out.push_back(Join(sysfs::kHardwareDir, hw));
  for (std::string_view cat : kHostMemCategories) {
    for (std::string_view field : sysfs::kCounterFields) {
      out.push_back(Join(Join(sysfs::kHostMemDir, cat), field));
    }
  }
  // Discovery reads the first core's architecture; the sampler every core's counters.
  if (physical_cores > 0) out.push_back(Join(sysfs::CoreDir(0), sysfs::kArchType));
  for (int c = 0; c < physical_cores; ++c) {
    const std::string core = sysfs::CoreDir(c);
    auto counter = [&](std::string_view dir, size_t fields) {
      for (size_t i = 0; i < fields; ++i) {
        out.push_back(Join(Join(core, dir), sysfs::kCounterFields[i]));
      }
    };
    for (const StatusCounterName& s : kStatusCounters) counter(Join(sysfs::kStatusDir, s.sysfs), 2);
    counter(Join(sysfs::kMemoryUsageDir, sysfs::part::kHostMem), 3);
    counter(sysfs::kDeviceMemDir, 3);
    for (std::string_view cat : kDeviceMemCategories) counter(Join(sysfs::kDeviceMemDir, cat), 3);
    for (std::string_view name : kOtherInfo) counter(Join(sysfs::kOtherInfoDir, name), 2);
    out.push_back(Join(core, sysfs::kPeCounters));
  }
  for (int i = 0; i < kNodeGroupCount; ++i) {
    const auto g = static_cast<NodeGroup>(i);
    if (!groups.Has(g) || !kReadGroups.Has(g)) continue;
    for (const std::string& f : GroupDeviceFiles(g)) out.push_back(f);
  }
  return out;
}

}  // namespace neuron
