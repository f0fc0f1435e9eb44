#include "driver-sim/driver/sim_tree.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "core/base/file_io.h"
#include "core/base/hash.h"
#include "core/driver/device_attributes.h"
#include "driver-sim/driver/node_info.h"
#include "driver-sim/driver/sim_paths.h"
#include "driver-sim/driver/sim_tree_fs.h"
#include "driver-sim/driver/sim_tree_pci.h"

namespace neuron::sim {
namespace {

namespace fs = std::filesystem;

// A counter field as the driver would print it; anything else (a user's write, a
// missing file) counts as 0, which is how a write clears a field
// (docs/driver-interface.md#total-present-peak; D4, driver-sim/README.md#deviations).
uint64_t ReadCounterOrZero(const fs::path& file) {
  absl::StatusOr<std::string> text = ReadAttribute(file);
  if (!text.ok()) return 0;
  absl::StatusOr<uint64_t> v = ParseU64(StripNewline(*text), file);
  return v.ok() ? *v : 0;
}

std::string U64Line(uint64_t v) { return fmt::format("{}\n", v); }

// How a file reaches disk: WriteFileAtomic for a visible tree, WriteNewFile while a hidden
// directory is being built.
using FileWriter = absl::Status (*)(const fs::path&, std::string_view, mode_t);
constexpr FileWriter kAtomic = &WriteFileAtomic;
constexpr FileWriter kFresh = &WriteNewFile;

absl::Status WriteTriple(const fs::path& dir, uint64_t total, uint64_t present,
                         std::optional<uint64_t> peak, FileWriter write = kAtomic) {
  SIM_RETURN_IF_ERROR(write(dir / sysfs::kTotal, U64Line(total), kMetric));
  SIM_RETURN_IF_ERROR(write(dir / sysfs::kPresent, U64Line(present), kMetric));
  if (peak) SIM_RETURN_IF_ERROR(write(dir / sysfs::kPeak, U64Line(*peak), kMetric));
  return absl::OkStatus();
}

}  // namespace

SimTree::SimTree(RootPaths root, NodeConfig config)
    : root_(std::move(root)), config_(std::move(config)) {
  if (config_.instance_id.empty()) {
    config_.instance_id = fmt::format("i-0{:016x}", Fnv1a64(root_.root().string()));
  }
  if (config_.node_name.empty() && config_.spec != nullptr) {
    config_.node_name = fmt::format("sim-{}", config_.spec->name);
  }
}

absl::Status SimTree::CheckDevice(int device) const {
  if (config_.spec == nullptr) return absl::FailedPreconditionError("SimTree has no instance spec");
  // What a Nitro host's DMI holds; the agent uses no other form
  // (docs/architecture.md#instance-identity).
  if (!IsInstanceId(config_.instance_id)) {
    return absl::InvalidArgumentError(fmt::format(
        "instance id \"{}\" is not an EC2 instance id (\"i-\" and 8 or 17 lowercase hex digits)",
        config_.instance_id));
  }
  if (device < 0 || device >= config_.spec->devices) {
    return absl::InvalidArgumentError(fmt::format("device {} does not exist on {} (0-{})", device,
                                                  config_.spec->name, config_.spec->devices - 1));
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> SimTree::EfaIndex(std::string_view name) const {
  if (config_.spec == nullptr) return absl::FailedPreconditionError("SimTree has no instance spec");
  std::vector<std::string_view> names;
  for (size_t i = 0; i < config_.spec->efas.size(); ++i) {
    if (config_.spec->efas[i].name == name) return i;
    names.push_back(config_.spec->efas[i].name);
  }
  return absl::NotFoundError(
      fmt::format("no EFA device '{}' on {}; known: {}", name, config_.spec->name,
                  names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
}

fs::path SimTree::CoreDir(int device, int physical_core) const {
  return root_.NeuronDevice(device) / sysfs::CoreDir(physical_core);
}
fs::path SimTree::OtherInfoDir(int device, int physical_core, std::string_view name) const {
  return CoreDir(device, physical_core) / sysfs::kOtherInfoDir / name;
}
fs::path SimTree::StatusDir(int device, int physical_core, std::string_view name) const {
  return CoreDir(device, physical_core) / sysfs::kStatusDir / name;
}
fs::path SimTree::DeviceMemDir(int device, int physical_core, std::string_view cat) const {
  return CoreDir(device, physical_core) / sysfs::kDeviceMemDir / cat;
}
fs::path SimTree::HostMemDir(int device, std::string_view cat) const {
  return root_.NeuronDevice(device) / sysfs::kHostMemDir / cat;
}

namespace {

// One physical core's directory in its post-probe state.
// The simulated value of each published attribute (core/driver/device_attributes.h); absent
// where the simulated chip has no such file. A row without a value here fails
// SimTreeTest.EveryPublishedAttributeIsWritten.
std::optional<std::string> AttributeValue(std::string_view key, const NodeConfig& config, int d) {
  if (key == "serial_number") {
    if (!config.spec->chip->has_serial_number) return std::nullopt;
    return fmt::format("{:016x}", Fnv1a64(fmt::format("{}/{}", config.instance_id, d)));
  }
  return std::nullopt;
}

absl::Status WriteNeuronCore(const fs::path& core, const ChipSpec& chip, int c) {
  SIM_RETURN_IF_ERROR(
      WriteNewFile(core / sysfs::kArchType, fmt::format("{}\n", chip.nc_arch_type), kMetric));
  for (const StatusCounterName& s : kStatusCounters) {
    SIM_RETURN_IF_ERROR(
        WriteTriple(core / sysfs::kStatusDir / s.sysfs, 0, 0, std::nullopt, kFresh));
  }
  const uint64_t host = c == 0 ? kProbeHostDriverMemory : 0;
  SIM_RETURN_IF_ERROR(WriteTriple(core / sysfs::kHostMemDir, host, host, host, kFresh));
  SIM_RETURN_IF_ERROR(WriteTriple(core / sysfs::kDeviceMemDir, 0, 0, 0, kFresh));
  for (std::string_view cat : kDeviceMemCategories) {
    SIM_RETURN_IF_ERROR(WriteTriple(core / sysfs::kDeviceMemDir / cat, 0, 0, 0, kFresh));
  }
  for (size_t i = 0; i < kOtherInfo.size(); ++i) {
    // The probe reset requests every core once (docs/driver-interface.md#post-load-values).
    const uint64_t v = i == Index(OtherInfoCounter::reset_req_count) ? 1 : 0;
    SIM_RETURN_IF_ERROR(
        WriteTriple(core / sysfs::kOtherInfoDir / kOtherInfo[i], v, v, std::nullopt, kFresh));
  }
  std::string pe = "xrow_grp,mm_active,wl_active,idle\n";
  for (int g = 0; g < 4; ++g) pe += fmt::format("{},0,0,0\n", g);
  return WriteNewFile(core / sysfs::kPeCounters, pe, kMetric);
}

}  // namespace

// The class device in its post-probe state (docs/driver-interface.md#sysfs-tree,
// #post-load-values). Built under a hidden name and renamed into place, so a scanner never meets a
// half-written device.
absl::Status SimTree::WriteNeuronDevice(int d) {
  const ChipSpec& chip = *config_.spec->chip;
  const fs::path final_dir = root_.NeuronDevice(d);
  const std::string name = final_dir.filename().string();
  const fs::path dir = root_.NeuronDevicesDir() / fmt::format(".{}.new", name);
  SIM_RETURN_IF_ERROR(RemovePath(dir));
  auto put = [&](const fs::path& rel, std::string_view content, mode_t mode = kMetric) {
    return WriteNewFile(dir / rel, content, mode);
  };
  SIM_RETURN_IF_ERROR(put("dev", fmt::format("{}:{}\n", config_.neuron_major, d), kReadOnly));
  SIM_RETURN_IF_ERROR(put(
      "uevent", fmt::format("MAJOR={}\nMINOR={}\nDEVNAME={}\n", config_.neuron_major, d, name)));
  // Depth: sys/devices/virtual/neuron_device/neuronN -> four levels up is sys/.
  SIM_RETURN_IF_ERROR(
      MakeSymlink(fmt::format("../../../../class/{}", kNeuronClass), dir / "subsystem"));
  SIM_RETURN_IF_ERROR(MakeDirs(dir / "power"));
  SIM_RETURN_IF_ERROR(put(sysfs::kReset, "1\n", kRootWrite));
  const mode_t topology = TopologyMode(config_.driver);
  SIM_RETURN_IF_ERROR(put(sysfs::kCoreCount, fmt::format("{}", chip.physical_cores), topology));
  const std::vector<int> peers = ConnectedDevices(*config_.spec, d);
  SIM_RETURN_IF_ERROR(
      put(sysfs::kConnectedDevices, fmt::format("{}\n", fmt::join(peers, ", ")), topology));
  SIM_RETURN_IF_ERROR(put(sysfs::kNotifyDelay, "-1\n"));
  for (const DeviceAttributeSpec& a : kDeviceAttributes) {
    if (const std::optional<std::string> v = AttributeValue(a.key, config_, d)) {
      SIM_RETURN_IF_ERROR(put(a.file, *v + "\n"));
    }
  }
  SIM_RETURN_IF_ERROR(put(sysfs::kArchType, fmt::format("{}\n", chip.arch_type)));
  SIM_RETURN_IF_ERROR(put(sysfs::kInstanceType, fmt::format("{}\n", chip.instance_type)));
  SIM_RETURN_IF_ERROR(put(sysfs::kDeviceName, fmt::format("{}\n", chip.device_name)));
  for (size_t i = 0; i < kHostMemCategories.size(); ++i) {
    const uint64_t v = i == Index(HostMemCategory::driver_memory) ? kProbeHostDriverMemory : 0;
    SIM_RETURN_IF_ERROR(
        WriteTriple(dir / sysfs::kHostMemDir / kHostMemCategories[i], v, v, v, kFresh));
  }
  for (std::string_view hw : kHardwareCounters) {
    SIM_RETURN_IF_ERROR(put(fs::path(sysfs::kHardwareDir) / hw, "0\n"));
  }
  SIM_RETURN_IF_ERROR(put(sysfs::kPowerUtilization, "POWER_STATUS_NO_DATA,0,0.00,0.00,0.00\n"));
  for (int c = 0; c < chip.physical_cores; ++c) {
    SIM_RETURN_IF_ERROR(WriteNeuronCore(dir / sysfs::CoreDir(c), chip, c));
  }
  SIM_RETURN_IF_ERROR(WriteGroupFiles(dir, chip, config_.driver));
  SIM_RETURN_IF_ERROR(RenamePath(dir, final_dir));

  // Links are relative, from where each one sits to the device.
  const fs::path class_link = root_.NeuronClassDir() / name;
  SIM_RETURN_IF_ERROR(
      MakeSymlink(final_dir.lexically_relative(class_link.parent_path()).string(), class_link));
  const fs::path char_link =
      root_.Sys() / "dev/char" / fmt::format("{}:{}", config_.neuron_major, d);
  SIM_RETURN_IF_ERROR(
      MakeSymlink(final_dir.lexically_relative(char_link.parent_path()).string(), char_link));
  return WriteFileAtomic(root_.DevNeuron(d), "", 0666);
}

absl::Status SimTree::WriteNeuronPci(int d) {
  const DevicePlacement& p = config_.spec->placement[d];
  return WritePciFunction(root_, {p.bdf, config_.spec->chip->pci_device_id, 0x088000, p.numa_node,
                                  p.cpulist, config_.spec->vcpus, kPciDriverName});
}

absl::Status SimTree::WriteEfaPci(size_t i) {
  const EfaPlacement& e = config_.spec->efas[i];
  return WritePciFunction(
      root_, {e.bdf, kSimEfaPciDevice, 0x020000, e.numa_node,
              CpusOfNode(*config_.spec, e.numa_node), config_.spec->vcpus, sysfs::kEfaDriverName});
}

// The RDMA device and its uverbs node inside the EFA's PCI function (docs/driver-interface.md#efa),
// as the kernel lays them out: class entries are symlinks into the PCI device (D12 not taken,
// driver-sim/README.md#deviations).
absl::Status SimTree::WriteEfaIb(size_t i) {
  const EfaPlacement& e = config_.spec->efas[i];
  const fs::path pci = PciDeviceSysPath(root_, e.bdf);
  const std::string pci_rel =
      fmt::format("devices/{}/{}", pci.parent_path().filename().string(), e.bdf);

  const fs::path ib_final = pci / sysfs::kInfinibandClass / e.name;
  const fs::path ib = pci / sysfs::kInfinibandClass / fmt::format(".{}.new", e.name);
  SIM_RETURN_IF_ERROR(RemovePath(ib));
  SIM_RETURN_IF_ERROR(WriteNewFile(ib / "uevent", fmt::format("NAME={}\n", e.name), kMetric));
  SIM_RETURN_IF_ERROR(WriteNewFile(ib / "node_type", "7: unspecified\n", kReadOnly));
  // Depth: sys/devices/pci0000:BB/<BDF>/infiniband/<name> -> five levels up is sys/.
  SIM_RETURN_IF_ERROR(MakeSymlink(fmt::format("../../../../../class/{}", sysfs::kInfinibandClass),
                                  ib / "subsystem"));
  SIM_RETURN_IF_ERROR(MakeSymlink("../../", ib / sysfs::kDeviceLink));
  for (std::string_view c : kEfaDeviceCounters) {
    SIM_RETURN_IF_ERROR(WriteNewFile(ib / sysfs::kHwCountersDir / c, "0\n", kReadOnly));
  }
  SIM_RETURN_IF_ERROR(WriteNewFile(ib / sysfs::kHwCountersDir / "lifespan", "10\n", kMetric));
  SIM_RETURN_IF_ERROR(WriteNewFile(ib / sysfs::kPortState, "4: ACTIVE\n", kReadOnly));
  SIM_RETURN_IF_ERROR(WriteNewFile(ib / sysfs::kPortPhysState, "5: LinkUp\n", kReadOnly));
  SIM_RETURN_IF_ERROR(
      WriteNewFile(ib / sysfs::kPortRate, EfaRateString(config_.spec->efa_gbps) + "\n", kReadOnly));
  for (std::string_view c : kEfaPortCounters) {
    SIM_RETURN_IF_ERROR(WriteNewFile(ib / sysfs::kPortHwCountersDir / c, "0\n", kReadOnly));
  }
  SIM_RETURN_IF_ERROR(WriteNewFile(ib / sysfs::kPortHwCountersDir / "lifespan", "10\n", kMetric));
  SIM_RETURN_IF_ERROR(RenamePath(ib, ib_final));
  SIM_RETURN_IF_ERROR(
      MakeSymlink(fmt::format("../../{}/{}/{}", pci_rel, sysfs::kInfinibandClass, e.name),
                  root_.InfinibandClassDir() / e.name));

  const std::string uv_name = fmt::format("{}{}", sysfs::kUverbsPrefix, i);
  const int minor = kUverbsMinorBase + static_cast<int>(i);
  const fs::path uv_final = pci / sysfs::kUverbsClass / uv_name;
  const fs::path uv = pci / sysfs::kUverbsClass / fmt::format(".{}.new", uv_name);
  SIM_RETURN_IF_ERROR(RemovePath(uv));
  SIM_RETURN_IF_ERROR(WriteNewFile(uv / sysfs::kIbdev, e.name + "\n", kReadOnly));
  SIM_RETURN_IF_ERROR(WriteNewFile(uv / "abi_version", "1\n", kReadOnly));
  SIM_RETURN_IF_ERROR(
      WriteNewFile(uv / "dev", fmt::format("{}:{}\n", kUverbsMajor, minor), kReadOnly));
  SIM_RETURN_IF_ERROR(WriteNewFile(
      uv / "uevent",
      fmt::format("MAJOR={}\nMINOR={}\nDEVNAME=infiniband/{}\n", kUverbsMajor, minor, uv_name),
      kMetric));
  SIM_RETURN_IF_ERROR(
      MakeSymlink(fmt::format("../../../../../class/{}", sysfs::kUverbsClass), uv / "subsystem"));
  SIM_RETURN_IF_ERROR(MakeSymlink("../../", uv / sysfs::kDeviceLink));
  SIM_RETURN_IF_ERROR(RenamePath(uv, uv_final));
  const std::string uv_rel = fmt::format("../../{}/{}/{}", pci_rel, sysfs::kUverbsClass, uv_name);
  SIM_RETURN_IF_ERROR(MakeSymlink(uv_rel, root_.UverbsClassDir() / uv_name));
  SIM_RETURN_IF_ERROR(
      MakeSymlink(uv_rel, root_.Sys() / "dev/char" / fmt::format("{}:{}", kUverbsMajor, minor)));
  return WriteFileAtomic(root_.Dev() / "infiniband" / uv_name, "", 0666);
}

absl::Status SimTree::WriteDmi() {
  const fs::path dir = root_.Sys() / "devices/virtual" / sysfs::kDmiSubsystem / sysfs::kDmiSysname;
  const std::string_view type = config_.spec->name;
  SIM_RETURN_IF_ERROR(WriteFileAtomic(dir / sysfs::kDmiSysVendor, "Amazon EC2\n", kReadOnly));
  SIM_RETURN_IF_ERROR(
      WriteFileAtomic(dir / sysfs::kDmiProductName, fmt::format("{}\n", type), kReadOnly));
  SIM_RETURN_IF_ERROR(
      WriteFileAtomic(dir / sysfs::kDmiBoardAssetTag, config_.instance_id + "\n", kReadOnly));
  SIM_RETURN_IF_ERROR(WriteFileAtomic(
      dir / "uevent", fmt::format("MODALIAS=dmi:svnAmazonEC2:pn{}:\n", type), kMetric));
  SIM_RETURN_IF_ERROR(
      MakeSymlink(fmt::format("../../../../class/{}", sysfs::kDmiSubsystem), dir / "subsystem"));
  return MakeSymlink(dir.lexically_relative(root_.DmiDir().parent_path()).string(), root_.DmiDir());
}

absl::Status SimTree::WriteClassAttributes() {
  // UltraServer attributes (docs/driver-interface.md#device-nodes; driver/ultraserver.h), as the
  // driver generation lays them out (#driver-generations).
  const bool ultraserver_platform = config_.spec->ultraserver_instances > 0;
  for (const auto& [name, value] :
       ClassAttributes(config_.driver, ultraserver_platform,
                       UltraServerClassFiles(*config_.spec, config_.ultraserver))) {
    SIM_RETURN_IF_ERROR(WriteFileAtomic(root_.NeuronClassDir() / name, value, kReadOnly));
  }
  return absl::OkStatus();
}

// MODULE_VERSION, as the kernel shows it ("%s\n", DRV neuron_module.c).
absl::Status SimTree::WriteModule() {
  return WriteFileAtomic(root_.ModuleVersion(), config_.driver.module_version + "\n", kReadOnly);
}

absl::Status SimTree::WriteNodeJson() {
  NodeInfo info;
  info.instance_type = std::string(config_.spec->name);
  info.instance_id = config_.instance_id;
  info.node_name = config_.node_name;
  info.lnc = config_.lnc;
  for (const DevicePlacement& p : config_.spec->placement) info.device_bdf.push_back(p.bdf);
  return WriteFileAtomic(sim::NodeJsonPath(root_), NodeInfoToJson(info), kMetric);
}

absl::Status SimTree::Create() {
  if (config_.spec == nullptr) return absl::FailedPreconditionError("SimTree has no instance spec");
  std::error_code ec;
  if (fs::exists(root_.NeuronClassDir(), ec) || fs::exists(root_.NeuronDevicesDir(), ec)) {
    return absl::FailedPreconditionError(
        fmt::format("{} already holds a neuron tree; destroy it first", root_.Sys().string()));
  }
  const InstanceSpec& spec = *config_.spec;
  absent_devices_.clear();
  absent_efas_.clear();
  for (const fs::path& dir :
       {root_.Sys() / "bus/pci/drivers" / kPciDriverName,
        root_.Sys() / "bus/pci/drivers" / sysfs::kEfaDriverName, root_.Sys() / "dev/char",
        root_.NeuronClassDir(), root_.NeuronDevicesDir(), root_.Dev()}) {
    SIM_RETURN_IF_ERROR(MakeDirs(dir));
  }
  SIM_RETURN_IF_ERROR(WriteModule());
  SIM_RETURN_IF_ERROR(WriteClassAttributes());
  for (int d = 0; d < spec.devices; ++d) {
    SIM_RETURN_IF_ERROR(WriteNeuronPci(d));
    SIM_RETURN_IF_ERROR(WriteNeuronDevice(d));
  }
  if (!spec.efas.empty()) {
    SIM_RETURN_IF_ERROR(WriteFileAtomic(root_.UverbsClassDir() / "abi_version", "6\n", kReadOnly));
  }
  for (size_t i = 0; i < spec.efas.size(); ++i) {
    SIM_RETURN_IF_ERROR(WriteEfaPci(i));
    SIM_RETURN_IF_ERROR(WriteEfaIb(i));
  }
  SIM_RETURN_IF_ERROR(WriteDmi());
  if (!fs::exists(root_.Kmsg(), ec)) {
    SIM_RETURN_IF_ERROR(WriteFileAtomic(root_.Kmsg(), "", kMetric));
  }
  return WriteNodeJson();
}

absl::StatusOr<NeuronMajorLease> NeuronMajorLease::Take(const fs::path& root) {
  std::vector<int> majors;
  for (int m = 234; m <= 254; ++m) majors.push_back(m);
  for (int m = 384; m <= 511; ++m) majors.push_back(m);
  const fs::path dir = "/tmp/neuron-sim-majors";
  std::error_code ec;
  fs::create_directories(dir, ec);
  ::chmod(dir.c_str(), 01777);  // shared by every user's simulated nodes, like /tmp itself
  const size_t start = std::hash<std::string>{}(root.lexically_normal().string()) % majors.size();
  for (size_t i = 0; i < majors.size(); ++i) {
    const int major = majors[(start + i) % majors.size()];
    const fs::path lock = dir / std::to_string(major);
    const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return NeuronMajorLease(major, fd);
    ::close(fd);
  }
  return absl::ResourceExhaustedError(
      fmt::format("every dynamic char major is held by another simulated node ({})", dir.string()));
}

NeuronMajorLease::~NeuronMajorLease() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status SimTree::Destroy() {
  SIM_RETURN_IF_ERROR(RemovePath(root_.Sys()));
  std::error_code ec;
  if (fs::is_directory(root_.Dev(), ec)) {
    for (const fs::directory_entry& e : fs::directory_iterator(root_.Dev(), ec)) {
      const std::string name = e.path().filename().string();
      if (name.starts_with(sysfs::kDevicePrefix) || name == "infiniband" ||
          name == root_.Kmsg().filename()) {
        SIM_RETURN_IF_ERROR(RemovePath(e.path()));
      }
    }
    fs::remove(root_.Dev(), ec);  // only if now empty
  }
  SIM_RETURN_IF_ERROR(RemovePath(sim::NodeJsonPath(root_)));
  fs::remove(sim::SimRunDir(root_), ec);
  fs::remove(sim::SimRunDir(root_).parent_path(), ec);
  absent_devices_.clear();
  absent_efas_.clear();
  return absl::OkStatus();
}

absl::Status SimTree::RemoveDevice(int device) {
  SIM_RETURN_IF_ERROR(CheckDevice(device));
  if (absent_devices_.contains(device)) {
    return absl::FailedPreconditionError(fmt::format("device {} is already unplugged", device));
  }
  // Links first, so nothing reaches a directory that is being removed.
  SIM_RETURN_IF_ERROR(RemovePath(root_.NeuronClassDir() / root_.NeuronDevice(device).filename()));
  SIM_RETURN_IF_ERROR(
      RemovePath(root_.Sys() / "dev/char" / fmt::format("{}:{}", config_.neuron_major, device)));
  SIM_RETURN_IF_ERROR(RemovePath(root_.DevNeuron(device)));
  SIM_RETURN_IF_ERROR(RemovePath(root_.NeuronDevice(device)));
  SIM_RETURN_IF_ERROR(
      RemovePciFunction(root_, config_.spec->placement[device].bdf, kPciDriverName));
  absent_devices_.insert(device);
  return absl::OkStatus();
}

absl::Status SimTree::AddDevice(int device) {
  SIM_RETURN_IF_ERROR(CheckDevice(device));
  if (!absent_devices_.contains(device)) {
    return absl::FailedPreconditionError(fmt::format("device {} is already present", device));
  }
  SIM_RETURN_IF_ERROR(WriteNeuronPci(device));
  SIM_RETURN_IF_ERROR(WriteNeuronDevice(device));
  absent_devices_.erase(device);
  return absl::OkStatus();
}

bool SimTree::DevicePresent(int device) const {
  return CheckDevice(device).ok() && !absent_devices_.contains(device);
}

absl::Status SimTree::SetDeviceState(int device, DeviceState state) {
  SIM_RETURN_IF_ERROR(CheckDevice(device));
  if (!DevicePresent(device)) {
    return absl::FailedPreconditionError(fmt::format("device {} is unplugged", device));
  }
  return WriteFileAtomic(root_.NeuronDevice(device) / sysfs::kReset,
                         fmt::format("{}\n", static_cast<int>(state)), kRootWrite);
}

absl::StatusOr<DeviceState> SimTree::GetDeviceState(int device) const {
  SIM_RETURN_IF_ERROR(CheckDevice(device));
  const fs::path file = root_.NeuronDevice(device) / sysfs::kReset;
  absl::StatusOr<uint64_t> v = ReadU64(file);
  if (!v.ok()) return v.status();
  if (*v > 2) {
    return absl::DataLossError(fmt::format("{}: state {} is not 0, 1 or 2", file.string(), *v));
  }
  return static_cast<DeviceState>(*v);
}

absl::Status SimTree::AddHardwareErrors(int device, std::string_view counter, uint64_t n) {
  SIM_RETURN_IF_ERROR(CheckDevice(device));
  const HealthCounter* row = FindHealthCounter(counter);
  if (row == nullptr) {
    std::vector<std::string_view> known;
    known.reserve(kHealthCounters.size());
    for (const HealthCounter& c : kHealthCounters) known.push_back(c.name);
    return absl::InvalidArgumentError(
        fmt::format("unknown health counter '{}'; known: {}", counter, fmt::join(known, ", ")));
  }
  const std::string_view chip = config_.spec->chip->instance_type;
  if (row->group && !GroupsOnChip(config_.driver.groups, chip).Has(*row->group)) {
    return absl::FailedPreconditionError(
        fmt::format("driver {} on {} has no {}/{} (driver-sim/README.md#driver-versions)",
                    config_.driver.name, chip, row->dir, counter));
  }
  if (!DevicePresent(device)) {
    return absl::FailedPreconditionError(fmt::format("device {} is unplugged", device));
  }
  const fs::path file = CounterFile(device, *row);
  // "%u" of the firmware count; SRAM shows only its low 16 bits
  // (docs/driver-interface.md#device-files). The corrected counters are assumed "%u" too.
  const uint64_t mask =
      counter == Name(HardwareCounter::sram_ecc_uncorrected) ? 0xffff : 0xffffffff;
  const mode_t mode = row->dir == sysfs::kHealthStatusDir ? kReadOnly : kMetric;
  SIM_RETURN_IF_ERROR(WriteFileAtomic(file, U64Line((ReadCounterOrZero(file) + n) & mask), mode));
  return RaiseHealthStatus(root_.NeuronDevice(device), *config_.spec->chip, config_.driver, counter,
                           n);
}

fs::path SimTree::CounterFile(int device, const HealthCounter& counter) const {
  std::string_view dir = counter.dir;
  if (!dir.starts_with(sysfs::kHardwareDir)) return root_.NeuronDevice(device) / dir / counter.name;
  dir.remove_prefix(sysfs::kHardwareDir.size());  // "" or "/health_status"
  return HardwareDir(device) / fs::path(dir).relative_path() / counter.name;
}

fs::path SimTree::HardwareDir(int device) const {
  return root_.NeuronDevice(device) / sim::HardwareDir(config_.driver);
}

bool SimTree::HasHealthComponents() const {
  return sim::HasHealthComponents(*config_.spec->chip, config_.driver);
}

fs::path SimTree::HealthFile(int device, std::string_view name) const {
  return root_.NeuronDevice(device) / sim::HealthFile(config_.driver, name);
}

absl::Status SimTree::WriteUnhealthyComponents(int device, const HealthComponents& components) {
  return WriteHealthFile(device, sysfs::kUnhealthyComponentsName, components.Join() + "\n");
}

absl::Status SimTree::WriteHeartbeat(int device, uint64_t beats) {
  return WriteHealthFile(device, sysfs::kHealthcheckHeartbeatName, U64Line(beats));
}

absl::Status SimTree::WriteHealthFile(int device, std::string_view name, std::string_view content) {
  SIM_RETURN_IF_ERROR(CheckDevice(device));
  if (!DevicePresent(device)) {
    return absl::FailedPreconditionError(fmt::format("device {} is unplugged", device));
  }
  return sim::WriteHealthFile(root_.NeuronDevice(device), *config_.spec->chip, config_.driver, name,
                              content);
}

absl::Status SimTree::ApplyCounter(const fs::path& dir, CounterOp op, uint64_t value) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(fmt::format("{}: no such counter directory", dir.string()));
  }
  uint64_t total = ReadCounterOrZero(dir / sysfs::kTotal);
  const bool has_peak = fs::exists(dir / sysfs::kPeak, ec);
  uint64_t peak = has_peak ? ReadCounterOrZero(dir / sysfs::kPeak) : 0;
  uint64_t present = value;
  switch (op) {
    case CounterOp::kInc:
      if (value == 0) return absl::OkStatus();  // the driver skips d == 0
      total += value;                           // u64 arithmetic wraps, as the driver's does
      peak = std::max(peak, total);
      break;
    case CounterOp::kDec:
      if (value == 0) return absl::OkStatus();
      total -= value;
      break;
    case CounterOp::kSet:
      total = value;
      peak = std::max(peak, value);
      break;
  }
  return WriteTriple(dir, total, present, has_peak ? std::optional<uint64_t>(peak) : std::nullopt);
}

absl::Status SimTree::WritePower(int device, std::string_view status, int64_t epoch,
                                 uint32_t min_bp, uint32_t max_bp, uint32_t avg_bp) {
  SIM_RETURN_IF_ERROR(CheckDevice(device));
  if (!DevicePresent(device)) {
    return absl::FailedPreconditionError(fmt::format("device {} is unplugged", device));
  }
  auto pct = [](uint32_t bp) { return fmt::format("{}.{:02}", bp / 100, bp % 100); };
  SIM_RETURN_IF_ERROR(WriteFileAtomic(
      root_.NeuronDevice(device) / sysfs::kPowerUtilization,
      fmt::format("{},{},{},{},{}\n", status, epoch, pct(min_bp), pct(max_bp), pct(avg_bp)),
      kMetric));
  if (!config_.driver.groups.Has(NodeGroup::kUtilizationRaw)) return absl::OkStatus();
  const bool valid = status == "POWER_STATUS_VALID";
  uint32_t& samples = power_samples_[device];
  if (valid) ++samples;
  return WriteFileAtomic(
      root_.NeuronDevice(device) / sysfs::kPowerUtilizationRaw,
      PowerRawText(*config_.spec->chip, valid ? std::optional<uint32_t>(avg_bp) : std::nullopt,
                   samples),
      kMetric);
}

absl::Status SimTree::RemoveEfa(std::string_view name) {
  absl::StatusOr<size_t> i = EfaIndex(name);
  if (!i.ok()) return i.status();
  if (absent_efas_.contains(name)) {
    return absl::FailedPreconditionError(fmt::format("EFA {} is already down", name));
  }
  const EfaPlacement& e = config_.spec->efas[*i];
  const std::string uv = fmt::format("{}{}", sysfs::kUverbsPrefix, *i);
  const fs::path pci = PciDeviceSysPath(root_, e.bdf);
  SIM_RETURN_IF_ERROR(RemovePath(root_.InfinibandClassDir() / e.name));
  SIM_RETURN_IF_ERROR(RemovePath(root_.UverbsClassDir() / uv));
  SIM_RETURN_IF_ERROR(RemovePath(root_.Sys() / "dev/char" /
                                 fmt::format("{}:{}", kUverbsMajor, kUverbsMinorBase + *i)));
  SIM_RETURN_IF_ERROR(RemovePath(root_.Dev() / "infiniband" / uv));
  SIM_RETURN_IF_ERROR(RemovePath(pci / sysfs::kInfinibandClass / e.name));
  SIM_RETURN_IF_ERROR(RemovePath(pci / sysfs::kUverbsClass / uv));
  absent_efas_.insert(std::string(name));
  return absl::OkStatus();
}

absl::Status SimTree::AddEfa(std::string_view name) {
  absl::StatusOr<size_t> i = EfaIndex(name);
  if (!i.ok()) return i.status();
  auto it = absent_efas_.find(name);
  if (it == absent_efas_.end()) {
    return absl::FailedPreconditionError(fmt::format("EFA {} is already up", name));
  }
  SIM_RETURN_IF_ERROR(WriteEfaIb(*i));
  absent_efas_.erase(it);
  return absl::OkStatus();
}

bool SimTree::EfaPresent(std::string_view name) const {
  return EfaIndex(name).ok() && !absent_efas_.contains(name);
}

absl::Status SimTree::AddEfaCounter(std::string_view name, std::string_view counter, uint64_t n) {
  absl::StatusOr<size_t> i = EfaIndex(name);
  if (!i.ok()) return i.status();
  if (absent_efas_.contains(name)) {
    return absl::FailedPreconditionError(fmt::format("EFA {} is down", name));
  }
  const fs::path ib =
      PciDeviceSysPath(root_, config_.spec->efas[*i].bdf) / sysfs::kInfinibandClass / name;
  fs::path file;
  if (std::find(kEfaPortCounters.begin(), kEfaPortCounters.end(), counter) !=
      kEfaPortCounters.end()) {
    file = ib / sysfs::kPortHwCountersDir / counter;
  } else if (std::find(kEfaDeviceCounters.begin(), kEfaDeviceCounters.end(), counter) !=
             kEfaDeviceCounters.end()) {
    file = ib / sysfs::kHwCountersDir / counter;
  } else {
    return absl::InvalidArgumentError(fmt::format("unknown EFA counter '{}'", counter));
  }
  return WriteFileAtomic(file, U64Line(ReadCounterOrZero(file) + n), kReadOnly);
}

absl::Status SimTree::AppendKmsg(int priority, std::string_view text) {
  absl::StatusOr<uint64_t> seq = AppendKmsgRecord(root_.Kmsg(), priority, text, kmsg_seq_);
  if (!seq.ok()) return seq.status();
  kmsg_seq_ = *seq + 1;
  return absl::OkStatus();
}

}  // namespace neuron::sim
