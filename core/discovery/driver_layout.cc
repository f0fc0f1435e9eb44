// The driver's generation and each device's sysfs layout (docs/driver-interface.md#detection),
// checked once per scan so that no sample or scrape spends a read on it.

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <set>
#include <string_view>
#include <utility>

#include "core/base/file_io.h"
#include "core/base/unique_fd.h"
#include "core/discovery/internal/discovery_internal.h"
#include "core/driver/sysfs_files.h"

namespace neuron::discovery_internal {
namespace {

bool Accessible(int dir_fd, const std::string& rel) {
  return ::faccessat(dir_fd, rel.c_str(), F_OK, 0) == 0;
}

// `rel` split at its last '/': its directory ("" for the device directory's own) and its name.
std::pair<std::string_view, std::string_view> SplitLast(std::string_view rel) {
  const size_t slash = rel.rfind('/');
  if (slash == std::string_view::npos) return {std::string_view{}, rel};
  return {rel.substr(0, slash), rel.substr(slash + 1)};
}

bool IsCounterField(std::string_view name) {
  return std::find(sysfs::kCounterFields.begin(), sysfs::kCounterFields.end(), name) !=
         sysfs::kCounterFields.end();
}

// The directory entry whose presence answers for a path: its own, or for a counter's field
// (total, present, peak) its counter directory's. The driver makes each counter one kobject with
// one attribute group (neuron_sysfs_metrics.c nsysfsmetric_init_and_add_one_node), which sysfs
// creates and removes whole with the directory; so the fields of a listed counter directory are
// there, and a check needs no listing of the ~360 counter directories of a trn2 device.
struct Witness {
  std::string_view dir;   // where it is listed; "" for the device directory
  std::string_view name;  // its name there
  bool field = false;     // the path is a field of the counter directory `name`
};

Witness WitnessOf(std::string_view rel) {
  const auto [dir, name] = SplitLast(rel);
  if (!dir.empty() && IsCounterField(name)) {
    const auto [counter_parent, counter] = SplitLast(dir);
    return {counter_parent, counter, true};
  }
  return {dir, name, false};
}

// A path under a core as the same path under core 0, and the core's own directory; a path
// outside the cores as it is. The driver makes every core's nodes from one table in one loop
// (neuron_sysfs_metrics.c nsysfsmetric_init_and_add_nc_default_nodes), so which nodes a core has
// is the driver's layout, the same on every core: the check lists core 0's directories and asks of
// the other cores only that their directory is there.
struct CorePath {
  std::string rel;       // the path to look up
  std::string core_dir;  // "neuron_core3" for a path of core 3; empty for core 0 and the rest
};

CorePath AsFirstCore(std::string_view rel) {
  if (!rel.starts_with(sysfs::kCorePrefix)) return {std::string(rel), {}};
  const size_t slash = rel.find('/');
  const std::string_view dir = rel.substr(0, slash);
  if (slash == std::string_view::npos || dir == sysfs::CoreDir(0)) return {std::string(rel), {}};
  return {sysfs::CoreDir(0) + std::string(rel.substr(slash)), std::string(dir)};
}

// The entries the layout check asks about under one device directory, each directory listed once
// and shared by every path whose witness is in it, and core 0's directories answering for every
// core's: a trn2 device's ~850 paths take 11 listings (openat, getdents64, close) and 2
// faccessat where one faccessat each took ~850 syscalls.
class DeviceListing {
 public:
  DeviceListing(int device_fd, const std::vector<std::string>& paths) : fd_(device_fd) {
    struct Wanted {
      std::set<std::string_view> names;
      size_t paths = 0;  // the paths it answers for
    };
    std::map<std::string_view, Wanted> wanted;
    auto want = [&](std::string_view rel) {
      const Witness w = WitnessOf(*looked_up_.insert(std::string(rel)).first);
      Wanted& d = wanted[w.dir];
      d.names.insert(w.name);
      ++d.paths;
    };
    for (const std::string& rel : paths) {
      const CorePath c = AsFirstCore(rel);
      want(c.rel);
      if (!c.core_dir.empty()) want(c.core_dir);
    }
    // A listing costs three syscalls; a directory that answers for fewer paths (info/ for
    // serial_number, core 0's info/architecture/) asks faccessat for each instead.
    for (const auto& [dir, d] : wanted) {
      dirs_.emplace(dir, d.paths < kListingSyscalls ? Dir{} : List(dir, d.names));
    }
  }

  // Whether `rel` (one of the paths) exists as faccessat(F_OK) says. Where the listing cannot say
  // alone (a symlink, which faccessat follows; an entry of unknown type; a counter "directory"
  // that is not one; a directory that could not be listed) faccessat decides.
  bool Exists(const std::string& rel) const {
    const CorePath c = AsFirstCore(rel);
    if (!c.core_dir.empty() && !Listed(c.core_dir)) return false;
    return Listed(c.rel);
  }

 private:
  static constexpr size_t kListingSyscalls = 3;  // openat, getdents64, close

  bool Listed(const std::string& rel) const {
    const Witness w = WitnessOf(rel);
    const Dir& d = dirs_.at(w.dir);
    if (!d.listed) return Accessible(fd_, rel);
    const auto it = d.types.find(w.name);
    if (it == d.types.end()) return false;
    if (it->second == DT_DIR || (!w.field && it->second == DT_REG)) return true;
    return Accessible(fd_, rel);
  }

  struct Dir {
    bool listed = false;  // false: not listed (too small, or not listable); faccessat decides
    std::map<std::string_view, unsigned char, std::less<>> types;  // wanted names found: d_type
  };

  // Reads `dir` until every wanted name is seen or its end: when nothing is missing, a
  // directory costs one getdents64.
  Dir List(std::string_view dir, const std::set<std::string_view>& names) const {
    Dir out;
    const std::string path = dir.empty() ? "." : std::string(dir);
    const UniqueFd fd(::openat(fd_, path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd.valid()) {
      out.listed = errno == ENOENT || errno == ENOTDIR;  // absent: every name in it is missing
      return out;
    }
    out.listed = true;
    alignas(dirent64) char buf[8192];
    while (out.types.size() < names.size()) {
      const ssize_t n = ::getdents64(fd.get(), buf, sizeof(buf));
      if (n <= 0) {
        out.listed = n == 0;
        break;
      }
      for (ssize_t at = 0; at < n;) {
        const auto* e = reinterpret_cast<const dirent64*>(buf + at);
        if (const auto it = names.find(e->d_name); it != names.end()) out.types[*it] = e->d_type;
        at += e->d_reclen;
      }
    }
    return out;
  }

  int fd_;
  std::set<std::string> looked_up_;  // the paths asked about: dirs_ and its names view into them
  std::map<std::string_view, Dir> dirs_;
};

// Which read groups the device directory `fd` holds (a group counts when its first file exists),
// and which of the files the agent reads that `e->expected` promises it lacks.
void CheckLayout(int fd, LayoutCache::Entry* e) {
  std::vector<std::string> paths = ReadDeviceFiles(e->expected, e->cores);
  const size_t read_files = paths.size();
  std::vector<NodeGroup> probed;  // the group whose first file is paths[read_files + i]
  for (int i = 0; i < kNodeGroupCount; ++i) {
    const auto g = static_cast<NodeGroup>(i);
    const auto files = GroupDeviceFiles(g);
    if (!kReadGroups.Has(g) || files.empty()) continue;
    probed.push_back(g);
    paths.push_back(files.front());
  }
  const DeviceListing listing(fd, paths);
  for (size_t i = 0; i < probed.size(); ++i) {
    if (listing.Exists(paths[read_files + i])) e->groups.Add(probed[i]);
  }
  for (size_t i = 0; i < read_files; ++i) {
    if (!listing.Exists(paths[i])) e->missing.push_back(paths[i]);
  }
}

// The device's layout into `dev`; from `cache` when the device's directory is the one checked
// before.
void CheckDevice(const RootPaths& root, NodeGroups expected, LayoutCache* cache,
                 NeuronDevice* dev) {
  dev->sysfs_groups = {};
  dev->missing_nodes.clear();
  const UniqueFd fd(
      ::open(root.NeuronDevice(dev->index).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  struct stat st {};
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0) return;  // vanished: the next scan drops it
  LayoutCache::Entry& e = cache->devices[dev->index];
  if (e.dev != st.st_dev || e.ino != st.st_ino || e.expected != expected ||
      e.cores != dev->physical_cores) {
    e = {st.st_dev, st.st_ino, expected, dev->physical_cores, {}, {}};
    CheckLayout(fd.get(), &e);
  }
  dev->sysfs_groups = e.groups;
  dev->missing_nodes = e.missing;
}

}  // namespace

void ReadDriverLayout(const RootPaths& root, Inventory* inv, LayoutCache* cache) {
  inv->driver = DriverInfo{};
  absl::StatusOr<std::string> version = ReadText(root.ModuleVersion());
  if (version.ok()) {
    inv->driver.version = *version;
    inv->driver.generation = GenerationOfVersion(*version);
  } else if (!absl::IsNotFound(version.status())) {
    inv->warnings.push_back(std::string{version.status().message()});
  }
  const NodeGroups promised = inv->driver.Expected().groups;
  std::map<int, LayoutCache::Entry> seen;
  for (NeuronDevice& d : inv->devices) {
    CheckDevice(root, GroupsOnChip(promised, d.instance_type), cache, &d);
    if (auto it = cache->devices.find(d.index); it != cache->devices.end()) seen.insert(*it);
  }
  cache->devices = std::move(seen);  // forget devices that went away
}

}  // namespace neuron::discovery_internal
