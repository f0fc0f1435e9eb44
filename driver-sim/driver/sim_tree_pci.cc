#include "driver-sim/driver/sim_tree_pci.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "core/base/file_io.h"
#include "driver-sim/driver/sim_tree.h"
#include "driver-sim/driver/sim_tree_fs.h"

namespace neuron::sim {
namespace {

namespace fs = std::filesystem;

// The kernel's "%*pb" bitmap (local_cpus): 32-bit hex groups, most significant first, the first
// group only as wide as the bits left over.
std::string CpuMask(const std::vector<int>& cpus, int nbits) {
  if (nbits <= 0) return "0";
  std::vector<uint32_t> words((nbits + 31) / 32, 0);
  for (int c : cpus) {
    if (c >= 0 && c < nbits) words[c / 32] |= 1u << (c % 32);
  }
  std::string out;
  int first_bits = nbits % 32 == 0 ? 32 : nbits % 32;
  for (size_t i = words.size(); i-- > 0;) {
    if (!out.empty()) out += ',';
    const int width = (first_bits + 3) / 4;
    out += fmt::format("{:0{}x}", words[i], width);
    first_bits = 32;
  }
  return out;
}

std::string Modalias(uint16_t device, int cls) {
  return fmt::format("pci:v{:08X}d{:08X}sv{:08X}sd{:08X}bc{:02X}sc{:02X}i{:02X}", kPciVendorAmazon,
                     device, kPciVendorAmazon, 0, (cls >> 16) & 0xff, (cls >> 8) & 0xff,
                     cls & 0xff);
}

}  // namespace

absl::Status WritePciFunction(const RootPaths& root, const PciFunction& f) {
  const fs::path dir = PciDeviceSysPath(root, f.bdf);
  const fs::path bus_dir = dir.parent_path();
  if (!fs::exists(bus_dir / "uevent")) {
    SIM_RETURN_IF_ERROR(WriteFileAtomic(bus_dir / "uevent", "", kMetric));
  }
  absl::StatusOr<std::vector<int>> cpus = ParseCpuList(f.cpulist, dir / sysfs::kLocalCpulist);
  if (!cpus.ok()) return cpus.status();
  const std::string id = fmt::format("{:04X}:{:04X}", kPciVendorAmazon, f.device);
  const std::vector<std::pair<std::string_view, std::string>> attrs = {
      {"vendor", fmt::format("0x{:04x}\n", kPciVendorAmazon)},
      {"device", fmt::format("0x{:04x}\n", f.device)},
      {"subsystem_vendor", fmt::format("0x{:04x}\n", kPciVendorAmazon)},
      {"subsystem_device", "0x0000\n"},
      {"class", fmt::format("0x{:06x}\n", f.cls)},
      {sysfs::kNumaNode, fmt::format("{}\n", f.numa_node)},
      {sysfs::kLocalCpulist, f.cpulist + "\n"},
      {"local_cpus", CpuMask(*cpus, f.vcpus) + "\n"},
  };
  for (const auto& [name, value] : attrs) {
    SIM_RETURN_IF_ERROR(WriteFileAtomic(dir / name, value, kReadOnly));
  }
  SIM_RETURN_IF_ERROR(WriteFileAtomic(
      dir / "uevent",
      fmt::format("DRIVER={}\nPCI_CLASS={:X}\nPCI_ID={}\nPCI_SUBSYS_ID={:04X}:0000\n"
                  "PCI_SLOT_NAME={}\nMODALIAS={}\n",
                  f.driver, f.cls, id, kPciVendorAmazon, f.bdf, Modalias(f.device, f.cls)),
      kMetric));
  // Depth: sys/devices/pci0000:BB/<BDF> -> three levels up is sys/.
  SIM_RETURN_IF_ERROR(MakeSymlink("../../../bus/pci", dir / "subsystem"));
  SIM_RETURN_IF_ERROR(MakeSymlink(fmt::format("../../../bus/pci/drivers/{}", f.driver),
                                  dir / sysfs::part::kDriver));
  const std::string rel = fmt::format("devices/{}/{}", bus_dir.filename().string(), f.bdf);
  SIM_RETURN_IF_ERROR(MakeSymlink("../../../" + rel, root.Sys() / "bus/pci/devices" / f.bdf));
  return MakeSymlink("../../../../" + rel, root.Sys() / "bus/pci/drivers" / f.driver / f.bdf);
}

absl::Status RemovePciFunction(const RootPaths& root, std::string_view bdf,
                               std::string_view driver) {
  SIM_RETURN_IF_ERROR(RemovePath(root.Sys() / "bus/pci/drivers" / driver / bdf));
  SIM_RETURN_IF_ERROR(RemovePath(root.Sys() / "bus/pci/devices" / bdf));
  return RemovePath(PciDeviceSysPath(root, bdf));
}

std::string CpusOfNode(const InstanceSpec& spec, int numa) {
  for (const DevicePlacement& p : spec.placement) {
    if (p.numa_node == numa) return p.cpulist;
  }
  return fmt::format("0-{}", spec.vcpus - 1);
}

fs::path PciDeviceSysPath(const RootPaths& root, std::string_view bdf) {
  // "DDDD:BB:SS.F": the root bus directory is pci<DDDD>:<BB>.
  const std::string bus(bdf.substr(0, std::min<size_t>(7, bdf.size())));
  return root.Sys() / "devices" / ("pci" + bus) / bdf;
}

}  // namespace neuron::sim
