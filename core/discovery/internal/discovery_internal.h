#pragma once
#if !defined(NEURON_ROOM_DISCOVERY)
#error "core/discovery/internal/ is private to core/discovery: include its public headers instead"
#endif
// Private to the discovery back ends (discovery_dir.cc, discovery_udev.cc): the attribute
// parsing both share, so that they cannot disagree on what a file means. Only enumeration and
// the way an attribute is fetched differ between them.

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/discovery/bdf.h"
#include "core/discovery/inventory.h"

namespace neuron::discovery_internal {

// One sysfs object (a device directory) whose attributes can be read by relative path.
class AttributeSource {
 public:
  virtual ~AttributeSource() = default;
  // The raw content (trailing newlines may or may not be stripped); NotFound when absent.
  virtual absl::StatusOr<std::string> Read(std::string_view relative) = 0;
  // The file's name for warnings.
  virtual std::string Display(std::string_view relative) const = 0;
};

// Reads a neuron_device's attributes into `dev` (index and dev_node are set by the caller).
void ReadNeuronDevice(AttributeSource& src, NeuronDevice* dev, std::vector<std::string>* warnings);
// Reads numa_node and (unless `cpulist` is null) local_cpulist of a PCI device.
void ReadPciPlacement(AttributeSource& pci, std::optional<int>* numa, std::string* cpulist,
                      std::vector<std::string>* warnings);
// Reads ports/1/{state,phys_state,rate} of an IB device.
void ReadEfaPort(AttributeSource& ib, EfaInterface* efa, std::vector<std::string>* warnings);
// uverbsN from the class entry's name ("uverbs3" -> 3); nullopt otherwise.
std::optional<int> UverbsIndex(std::string_view name);
// neuronN from a class entry's name; nullopt for anything else ("neuron_x", "neuron01", an index
// at or beyond kMaxDevices).
std::optional<int> NeuronIndex(std::string_view name);

// Reads numa_node (and local_cpulist unless null) of the PCI device `bdf`; each back end
// reaches PCI devices its own way.
using PciPlacementReader =
    std::function<void(const std::string& bdf, std::optional<int>* numa, std::string* cpulist,
                       std::vector<std::string>* warnings)>;

// The last steps of reading a Neuron device, the same in both back ends: its BDF from the
// resolver (absent when unknown; other resolver failures become warnings), its PCI placement,
// then the device and its warnings join the inventory.
void AddNeuronDevice(NeuronDevice dev, std::vector<std::string> warnings, BdfResolver& resolver,
                     const PciPlacementReader& read_pci, Inventory* inv);

// What both back ends read outside the device objects.
struct NodeIdentity {
  std::string dmi_product_name;  // "" when absent
  std::string dmi_asset_tag;     // "" when absent
};

// Instance identity, LNC, memory sizes from the catalog, and the final sort order.
void FinishInventory(const DiscoveryOptions& options, const NodeIdentity& identity, Inventory* inv);
// What ReadDriverLayout found per device, kept by a back end across scans. sysfs creates a
// device's attributes with its directory and removes them with it (a replug, a driver reload make
// a new directory), so a rescan checks only directories it has not seen: the first scan of a
// trn2.48xlarge checks about 13,000 paths in about 600 directory listings, a rescan none.
struct LayoutCache {
  struct Entry {
    dev_t dev = 0;
    ino_t ino = 0;
    NodeGroups expected;
    int cores = 0;
    NodeGroups groups;
    std::vector<std::string> missing;
  };
  std::map<int, Entry> devices;  // by device index
};

// The driver's module version and generation, and per device the read groups its tree holds and
// the files it lacks (docs/driver-interface.md#detection). Both back ends call it: it reads
// ROOT/sys itself, which under libudev is the same tree (the host's /sys, or the umockdev testbed
// at ROOT).
void ReadDriverLayout(const RootPaths& root, Inventory* inv, LayoutCache* cache);
// The BDF resolver the options ask for: DEVICE_BDF_EXT on the device node unless a test gave one.
std::unique_ptr<BdfResolver> MakeResolver(const DiscoveryOptions& options, const RootPaths& root);

}  // namespace neuron::discovery_internal
