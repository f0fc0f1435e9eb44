// The libudev back end (production, docs/architecture.md#discovery). libudev reads the host's /sys,
// or a umockdev testbed when the process runs with LD_PRELOAD=libumockdev-preload.so.0 and
// UMOCKDEV_DIR set. Files outside sysfs (/dev/neuronN for the BDF ioctl) still come from RootPaths.

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "core/base/udev_util.h"
#include "core/discovery/bdf.h"
#include "core/discovery/internal/discovery_internal.h"
#include "core/discovery/inventory.h"
#include "core/discovery/ultraserver.h"

namespace neuron {
namespace {

using discovery_internal::AttributeSource;
using udev_util::Udev;
using udev_util::UdevDevice;
using udev_util::UdevEnumerate;

class UdevSource final : public AttributeSource {
 public:
  explicit UdevSource(udev_device* dev) : dev_(dev), syspath_(udev_device_get_syspath(dev)) {}

  absl::StatusOr<std::string> Read(std::string_view rel) override {
    const std::string r(rel);
    errno = 0;
    const char* v = udev_device_get_sysattr_value(dev_, r.c_str());
    if (v != nullptr) return std::string(v);
    const int err = errno;
    const std::string msg =
        fmt::format("read {}: {}", Display(rel), err != 0 ? std::strerror(err) : "unreadable");
    // libudev reports a missing attribute as ENOENT (a directory as EISDIR, a link as EINVAL).
    if (err == ENOENT || err == 0) return absl::NotFoundError(msg);
    if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
    return absl::UnavailableError(msg);
  }
  std::string Display(std::string_view rel) const override {
    return fmt::format("{}/{}", syspath_, rel);
  }

 private:
  udev_device* dev_;
  std::string syspath_;
};

// Syspaths of every device in a subsystem.
std::vector<std::string> Enumerate(udev* u, const char* subsystem) {
  std::vector<std::string> out;
  UdevEnumerate e(udev_enumerate_new(u));
  if (!e) return out;
  udev_enumerate_add_match_subsystem(e.get(), subsystem);
  if (udev_enumerate_scan_devices(e.get()) < 0) return out;
  udev_list_entry* entry = nullptr;
  udev_list_entry_foreach(entry, udev_enumerate_get_list_entry(e.get())) {
    out.emplace_back(udev_list_entry_get_name(entry));
  }
  return out;
}

class UdevDiscovery final : public Discovery {
 public:
  UdevDiscovery(Udev udev, const RootPaths& root, DiscoveryOptions options)
      : udev_(std::move(udev)), root_(root), options_(options) {}

  absl::StatusOr<Inventory> Scan() override {
    Inventory inv;
    std::unique_ptr<BdfResolver> resolver = discovery_internal::MakeResolver(options_, root_);
    ScanDevices(*resolver, &inv);
    ScanEfas(&inv);
    discovery_internal::NodeIdentity identity;
    if (UdevDevice dmi{udev_device_new_from_subsystem_sysname(
            udev_.get(), sysfs::kDmiSubsystem.data(), sysfs::kDmiSysname.data())}) {
      UdevSource src(dmi.get());
      identity.dmi_product_name = ReadOr(src, sysfs::kDmiProductName, &inv.warnings);
      identity.dmi_asset_tag = ReadOr(src, sysfs::kDmiBoardAssetTag, &inv.warnings);
    }
    inv.ultraserver = ReadUltraServer(root_, &inv.warnings);
    discovery_internal::ReadDriverLayout(root_, &inv, &layout_);
    discovery_internal::FinishInventory(options_, identity, &inv);
    return inv;
  }

  std::string_view name() const override { return "udev"; }

 private:
  static std::string ReadOr(AttributeSource& src, std::string_view attr,
                            std::vector<std::string>* warnings) {
    absl::StatusOr<std::string> v = src.Read(attr);
    if (!v.ok()) {
      if (!absl::IsNotFound(v.status())) warnings->push_back(std::string{v.status().message()});
      return "";
    }
    std::string_view t = *v;
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.remove_suffix(1);
    return std::string(t);
  }

  void ScanDevices(BdfResolver& resolver, Inventory* inv) {
    for (const std::string& syspath : Enumerate(udev_.get(), kNeuronClass.data())) {
      UdevDevice dev(udev_device_new_from_syspath(udev_.get(), syspath.c_str()));
      if (!dev) continue;  // vanished since the enumeration
      const char* sysname = udev_device_get_sysname(dev.get());
      const std::optional<int> index =
          discovery_internal::NeuronIndex(sysname != nullptr ? sysname : "");
      if (!index) continue;
      NeuronDevice d;
      d.index = *index;
      // Host path (docs/architecture.md#allocation)
      d.dev_node = RootPaths("/").DevNeuron(*index).string();
      std::vector<std::string> warnings;
      UdevSource src(dev.get());
      discovery_internal::ReadNeuronDevice(src, &d, &warnings);
      if (!StillThere(syspath)) continue;  // vanished mid-scan: skipped, not an error
      discovery_internal::AddNeuronDevice(
          std::move(d), std::move(warnings), resolver,
          [this](const std::string& bdf, std::optional<int>* numa, std::string* cpulist,
                 std::vector<std::string>* w) { ReadPci(bdf, numa, cpulist, w); },
          inv);
    }
  }

  bool StillThere(const std::string& syspath) {
    return UdevDevice(udev_device_new_from_syspath(udev_.get(), syspath.c_str())) != nullptr;
  }

  void ReadPci(const std::string& bdf, std::optional<int>* numa, std::string* cpulist,
               std::vector<std::string>* warnings) {
    UdevDevice pci(udev_device_new_from_subsystem_sysname(udev_.get(), sysfs::kPciSubsystem.data(),
                                                          bdf.c_str()));
    if (!pci) return;
    UdevSource src(pci.get());
    discovery_internal::ReadPciPlacement(src, numa, cpulist, warnings);
  }

  std::map<std::string, int> UverbsByIbdev(Inventory* inv) {
    std::map<std::string, int> out;
    for (const std::string& syspath : Enumerate(udev_.get(), sysfs::kUverbsClass.data())) {
      UdevDevice dev(udev_device_new_from_syspath(udev_.get(), syspath.c_str()));
      if (!dev) continue;
      const char* sysname = udev_device_get_sysname(dev.get());
      const std::optional<int> n = discovery_internal::UverbsIndex(sysname ? sysname : "");
      if (!n) continue;
      UdevSource src(dev.get());
      absl::StatusOr<std::string> ibdev = src.Read(sysfs::kIbdev);
      if (ibdev.ok()) {
        std::string_view t = *ibdev;
        while (!t.empty() && t.back() == '\n') t.remove_suffix(1);
        out[std::string(t)] = *n;
      } else if (!absl::IsNotFound(ibdev.status())) {
        inv->warnings.push_back(std::string{ibdev.status().message()});
      }
    }
    return out;
  }

  void ScanEfas(Inventory* inv) {
    std::map<std::string, int> uverbs;
    bool uverbs_read = false;
    for (const std::string& syspath : Enumerate(udev_.get(), sysfs::kInfinibandClass.data())) {
      UdevDevice ib(udev_device_new_from_syspath(udev_.get(), syspath.c_str()));
      if (!ib) continue;
      // The `device` link leads to the PCI function; its driver tells EFA apart, never the name.
      const std::string pci_path = fmt::format("{}/{}", syspath, sysfs::kDeviceLink);
      UdevDevice pci(udev_device_new_from_syspath(udev_.get(), pci_path.c_str()));
      if (!pci) continue;
      const char* driver = udev_device_get_driver(pci.get());
      if (driver == nullptr || std::string_view(driver) != sysfs::kEfaDriverName) continue;
      if (!uverbs_read) {
        uverbs = UverbsByIbdev(inv);
        uverbs_read = true;
      }
      EfaInterface efa;
      const char* sysname = udev_device_get_sysname(ib.get());
      efa.name = sysname != nullptr ? sysname : "";
      std::vector<std::string> warnings;
      UdevSource src(ib.get());
      discovery_internal::ReadEfaPort(src, &efa, &warnings);
      if (!StillThere(syspath)) continue;
      const char* bdf = udev_device_get_sysname(pci.get());
      efa.bdf = bdf != nullptr ? bdf : "";
      if (!efa.bdf.empty()) ReadPci(efa.bdf, &efa.numa_node, nullptr, &warnings);
      if (auto it = uverbs.find(efa.name); it != uverbs.end()) efa.uverbs = it->second;
      inv->efas.push_back(std::move(efa));
      inv->warnings.insert(inv->warnings.end(), warnings.begin(), warnings.end());
    }
  }

  Udev udev_;
  RootPaths root_;
  DiscoveryOptions options_;
  discovery_internal::LayoutCache layout_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Discovery>> MakeUdevDiscovery(const RootPaths& root,
                                                             DiscoveryOptions options) {
  Udev u(udev_new());
  if (!u) {
    return absl::UnavailableError(
        fmt::format("udev_new failed: {}; use the directory back end", std::strerror(errno)));
  }
  return std::unique_ptr<Discovery>(new UdevDiscovery(std::move(u), root, options));
}

}  // namespace neuron
