// The directory back end: reads ROOT/sys directly (the simulator, containers without udev).
// Attributes are read relative to an open directory fd, so each file costs one openat() with a
// short path and a device that vanishes mid-scan is noticed (its directory is unlinked).

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <utility>

#include "core/base/file_io.h"
#include "core/base/unique_fd.h"
#include "core/discovery/bdf.h"
#include "core/discovery/internal/discovery_internal.h"
#include "core/discovery/inventory.h"
#include "core/discovery/ultraserver.h"

namespace neuron {
namespace {

using discovery_internal::AttributeSource;

UniqueFd OpenDir(int at, const char* rel) {
  return UniqueFd(::openat(at, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
}

// readlinkat() into a string; "" when it is not a link or absent.
std::string ReadLink(int at, const char* rel) {
  char buf[4096];
  const ssize_t n = ::readlinkat(at, rel, buf, sizeof(buf));
  if (n <= 0 || static_cast<size_t>(n) >= sizeof(buf)) return "";
  return std::string(buf, static_cast<size_t>(n));
}

std::string RealPath(const std::filesystem::path& p) {
  char buf[PATH_MAX];
  return ::realpath(p.c_str(), buf) != nullptr ? std::string(buf) : std::string();
}

// Where the directory `rel` under `at` (shown as `display`) leads, links resolved; "" when it
// cannot be opened. The kernel names the opened directory (/proc/self/fd/N): three syscalls,
// where realpath() tries every component of the absolute path as a link, about 11 for an EFA's
// device link under ROOT (~130 of neuron-ls's syscalls on a trn2.48xlarge). realpath() when /proc
// cannot say.
std::string ResolvedDir(int at, const char* rel, const std::filesystem::path& display) {
  const UniqueFd fd(::openat(at, rel, O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return "";
  const std::string proc_link = "/proc/self/fd/" + std::to_string(fd.get());
  char buf[PATH_MAX];
  const ssize_t n = ::readlink(proc_link.c_str(), buf, sizeof(buf));
  if (n <= 0 || static_cast<size_t>(n) >= sizeof(buf)) return RealPath(display);
  std::string path(buf, static_cast<size_t>(n));
  return path.ends_with(" (deleted)") ? "" : path;
}

std::string Basename(std::string_view link) {
  while (!link.empty() && link.back() == '/') link.remove_suffix(1);
  const size_t slash = link.rfind('/');
  return std::string(slash == std::string_view::npos ? link : link.substr(slash + 1));
}

class DirSource final : public AttributeSource {
 public:
  DirSource(int fd, std::filesystem::path display) : fd_(fd), display_(std::move(display)) {}
  absl::StatusOr<std::string> Read(std::string_view rel) override {
    const std::string r(rel);
    return ReadAttributeAt(fd_, r.c_str(), display_ / r);
  }
  std::string Display(std::string_view rel) const override { return (display_ / rel).string(); }

 private:
  int fd_;
  std::filesystem::path display_;
};

bool Unlinked(int dir_fd) {
  struct stat st {};
  return ::fstat(dir_fd, &st) != 0 || st.st_nlink == 0;
}

class DirectoryDiscovery final : public Discovery {
 public:
  DirectoryDiscovery(const RootPaths& root, DiscoveryOptions options)
      : root_(root), options_(std::move(options)) {}

  absl::StatusOr<Inventory> Scan() override {
    Inventory inv;
    std::unique_ptr<BdfResolver> resolver = discovery_internal::MakeResolver(options_, root_);
    ScanDevices(*resolver, &inv);
    ScanEfas(&inv);
    discovery_internal::NodeIdentity identity;
    identity.dmi_product_name = ReadDmi(sysfs::kDmiProductName, &inv.warnings);
    identity.dmi_asset_tag = ReadDmi(sysfs::kDmiBoardAssetTag, &inv.warnings);
    inv.ultraserver = ReadUltraServer(root_, &inv.warnings);
    discovery_internal::ReadDriverLayout(root_, &inv, &layout_);
    discovery_internal::FinishInventory(options_, identity, &inv);
    return inv;
  }

  std::string_view name() const override { return "directory"; }

 private:
  void ScanDevices(BdfResolver& resolver, Inventory* inv) {
    const std::filesystem::path class_dir = root_.NeuronClassDir();
    const UniqueFd class_fd = OpenDir(AT_FDCWD, class_dir.c_str());
    if (!class_fd.valid()) return;  // no driver loaded: no devices
    for (const std::string& entry : ListDir(class_dir)) {
      const std::optional<int> index = discovery_internal::NeuronIndex(entry);
      if (!index) continue;
      const UniqueFd dev_fd = OpenDir(class_fd.get(), entry.c_str());
      if (!dev_fd.valid()) continue;  // dangling link: unplugged while we looked
      NeuronDevice dev;
      dev.index = *index;
      // Host path (docs/architecture.md#allocation)
      dev.dev_node = RootPaths("/").DevNeuron(*index).string();
      std::vector<std::string> warnings;
      DirSource src(dev_fd.get(), class_dir / entry);
      discovery_internal::ReadNeuronDevice(src, &dev, &warnings);
      if (Unlinked(dev_fd.get())) continue;  // vanished mid-scan: skipped, not an error
      discovery_internal::AddNeuronDevice(
          std::move(dev), std::move(warnings), resolver,
          [this](const std::string& bdf, std::optional<int>* numa, std::string* cpulist,
                 std::vector<std::string>* w) { ReadPci(bdf, numa, cpulist, w); },
          inv);
    }
  }

  void ReadPci(const std::string& bdf, std::optional<int>* numa, std::string* cpulist,
               std::vector<std::string>* warnings) {
    const std::filesystem::path dir = root_.PciDevice(bdf);
    const UniqueFd fd = OpenDir(AT_FDCWD, dir.c_str());
    if (!fd.valid()) return;
    DirSource src(fd.get(), dir);
    discovery_internal::ReadPciPlacement(src, numa, cpulist, warnings);
  }

  std::map<std::string, int> UverbsByIbdev(Inventory* inv) {
    std::map<std::string, int> out;
    const std::filesystem::path dir = root_.UverbsClassDir();
    for (const std::string& entry : ListDir(dir)) {
      const std::optional<int> n = discovery_internal::UverbsIndex(entry);
      if (!n) continue;
      absl::StatusOr<std::string> ibdev = ReadText(dir / entry / sysfs::kIbdev);
      if (ibdev.ok()) {
        out[*ibdev] = *n;
      } else if (!absl::IsNotFound(ibdev.status())) {
        inv->warnings.push_back(std::string{ibdev.status().message()});
      }
    }
    return out;
  }

  void ScanEfas(Inventory* inv) {
    const std::filesystem::path class_dir = root_.InfinibandClassDir();
    const UniqueFd class_fd = OpenDir(AT_FDCWD, class_dir.c_str());
    if (!class_fd.valid()) return;
    std::map<std::string, int> uverbs;
    bool uverbs_read = false;
    for (const std::string& entry : ListDir(class_dir)) {
      const UniqueFd ib_fd = OpenDir(class_fd.get(), entry.c_str());
      if (!ib_fd.valid()) continue;
      // Only the driver link tells EFA apart; never the name (docs/driver-interface.md#efa).
      if (Basename(ReadLink(ib_fd.get(), sysfs::kDeviceDriverLink.data())) !=
          sysfs::kEfaDriverName) {
        continue;
      }
      if (!uverbs_read) {
        uverbs = UverbsByIbdev(inv);
        uverbs_read = true;
      }
      EfaInterface efa;
      efa.name = entry;
      std::vector<std::string> warnings;
      DirSource src(ib_fd.get(), class_dir / entry);
      discovery_internal::ReadEfaPort(src, &efa, &warnings);
      if (Unlinked(ib_fd.get())) continue;
      // Resolved, not read: the link may be "../../../0000:10:19.0" or "../.." alike.
      efa.bdf = Basename(ResolvedDir(ib_fd.get(), sysfs::kDeviceLink.data(),
                                     class_dir / entry / sysfs::kDeviceLink));
      if (!efa.bdf.empty()) {
        ReadPci(efa.bdf, &efa.numa_node, nullptr, &warnings);
      }
      if (auto it = uverbs.find(efa.name); it != uverbs.end()) efa.uverbs = it->second;
      inv->efas.push_back(std::move(efa));
      inv->warnings.insert(inv->warnings.end(), warnings.begin(), warnings.end());
    }
  }

  std::string ReadDmi(std::string_view attr, std::vector<std::string>* warnings) {
    absl::StatusOr<std::string> v = ReadText(root_.DmiDir() / attr);
    if (v.ok()) return *v;
    if (!absl::IsNotFound(v.status())) warnings->push_back(std::string{v.status().message()});
    return "";
  }

  RootPaths root_;
  DiscoveryOptions options_;
  discovery_internal::LayoutCache layout_;
};

}  // namespace

std::unique_ptr<Discovery> MakeDirectoryDiscovery(const RootPaths& root, DiscoveryOptions options) {
  return std::make_unique<DirectoryDiscovery>(root, std::move(options));
}

}  // namespace neuron
