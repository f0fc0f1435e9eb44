#pragma once
// The NeuronLink shape of a node as neuron-ls shows it (docs/tools-ux.md#ls-topology): recognised
// from what connected_devices says, so it works the same on hardware, on the simulator and on
// instance types the catalog does not know. Pure functions; thread-safe.

#include <string>
#include <vector>

#include "core/discovery/inventory.h"

namespace neuron::top {

enum class LinkShape {
  kNone,      // no device lists a neighbour (trn1.2xlarge, inf2.xlarge/8xlarge)
  kTorus4x4,  // 16 devices, 4x4 with wrap-around (trn1/trn1n.32xlarge, trn2.48xlarge)
  kRing,      // d <-> d+1 and n-1 <-> 0 (inf2.48xlarge)
  kChain,     // d <-> d+1 only (inf2.24xlarge)
  kOther,     // anything else: drawn as a list of links
};

struct LinkLayout {
  LinkShape shape = LinkShape::kNone;
  int size = 0;  // devices in the shape: highest index + 1
};

LinkLayout DetectLinkShape(const Inventory& inventory);

// A device's neighbours as neuron-ls prints them: on the torus in the order up, left, down,
// right, as every published trn1 and trn2 sample does although the trn2 driver lists the same
// set in another order (docs/driver-interface.md#connected-devices); otherwise in the driver's
// order.
std::vector<int> DisplayNeighbours(const NeuronDevice& device, const LinkLayout& layout);

// "Neuron Device Topology" and the drawing, each line ending in '\n'
// (docs/tools-ux.md#ls-topology): the 4x4 torus exactly as the trn2 sample (lines padded to 40
// columns, the wrap-around legend); a ring as two rows joined at both ends; a chain as the inf1
// sample's one row; "no NeuronLink" for devices without links.
std::string DrawTopology(const Inventory& inventory, const LinkLayout& layout);

}  // namespace neuron::top
