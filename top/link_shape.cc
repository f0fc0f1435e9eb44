#include "top/link_shape.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "top/format.h"

namespace neuron::top {
namespace {

constexpr std::string_view kLink = "◄––►";     // U+25C4, 2 x U+2013, U+25BA
constexpr std::string_view kWrapIn = "*––►";   // wrap-around link entering a row
constexpr std::string_view kWrapOut = "◄––*";  // and leaving it
constexpr std::string_view kUp = "▲";          // U+25B2
constexpr std::string_view kDown = "▼";        // U+25BC
constexpr std::string_view kVertical = "│";    // U+2502

std::set<int> NeighbourSet(const NeuronDevice& d) {
  return {d.connected.begin(), d.connected.end()};
}

// Up, left, down, right (docs/hardware.md#neuronlink-topology).
std::vector<int> TorusNeighbours(int d) {
  const int r = d / 4;
  const int c = d % 4;
  return {((r + 3) % 4) * 4 + c, r * 4 + (c + 3) % 4, ((r + 1) % 4) * 4 + c, r * 4 + (c + 1) % 4};
}

int Size(const Inventory& inv) {
  int n = 0;
  for (const NeuronDevice& d : inv.devices) n = std::max(n, d.index + 1);
  return n;
}

template <typename Expected>
bool AllMatch(const Inventory& inv, Expected expected) {
  for (const NeuronDevice& d : inv.devices) {
    const std::vector<int> e = expected(d.index);
    if (NeighbourSet(d) != std::set<int>(e.begin(), e.end())) return false;
  }
  return true;
}

std::string Box(int d) { return fmt::format("[{:2d} ]", d); }

// Devices 0 .. n-1.
std::vector<int> AllDevices(int n) {
  std::vector<int> all(static_cast<size_t>(std::max(n, 0)));
  std::iota(all.begin(), all.end(), 0);
  return all;
}

// A line of `mark` at the given columns, padded with spaces to `width` columns.
std::string MarkLine(std::string_view mark, const std::vector<int>& columns, int width) {
  std::string out;
  int col = 0;
  for (const int c : columns) {
    out.append(static_cast<size_t>(c - col), ' ');
    out += mark;
    col = c + 1;
  }
  if (col < width) out.append(static_cast<size_t>(width - col), ' ');
  return out + "\n";
}

// Boxes joined by links: "[ 0 ]◄––►[ 1 ]".
std::string BoxRow(const std::vector<int>& devices) {
  std::string out;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (i > 0) out += kLink;
    out += Box(devices[i]);
  }
  return out;
}

std::string DrawTorus() {
  // Box k of a row starts at column 4 + 9k; vertical marks sit under the digit, at 6 + 9k.
  constexpr int kWidth = 40;
  const std::vector<int> cols{6, 15, 24, 33};
  std::string out = "Neuron Device Topology\n";
  out += MarkLine("*", cols, kWidth);
  out += MarkLine(kVertical, cols, kWidth);
  out += MarkLine(kDown, cols, kWidth);
  for (int r = 0; r < 4; ++r) {
    out += std::string(kWrapIn) + BoxRow({r * 4, r * 4 + 1, r * 4 + 2, r * 4 + 3}) +
           std::string(kWrapOut) + "\n";
    out += MarkLine(kUp, cols, kWidth);
    out += MarkLine(kVertical, cols, kWidth);
    out += MarkLine(r < 3 ? kDown : "*", cols, kWidth);
  }
  out += "\nLegend:\n\n        *––► = Wrap-around link\n";
  return out;
}

std::string DrawRing(int n) {
  std::string out = "Neuron Device Topology\n\n";
  if (n % 2 != 0) {
    // One row whose ends wrap around to each other.
    out += std::string(kWrapIn) + BoxRow(AllDevices(n)) + std::string(kWrapOut) + "\n";
    out += "\nLegend:\n\n        *––► = Wrap-around link\n";
    return out;
  }
  // Two rows closed at both ends: 0 .. n/2-1 left to right, then n-1 .. n/2 below, so every
  // drawn link is a ring link; same geometry as the torus (box k at column 4 + 9k).
  const int half = n / 2;
  std::vector<int> top;
  std::vector<int> bottom;
  for (int k = 0; k < half; ++k) {
    top.push_back(k);
    bottom.push_back(n - 1 - k);
  }
  const int width = 4 + half * 5 + (half - 1) * 4;
  const std::vector<int> cols{6, 6 + 9 * (half - 1)};
  out += "    " + BoxRow(top) + "\n";
  out += MarkLine(kUp, cols, width);
  out += MarkLine(kVertical, cols, width);
  out += MarkLine(kDown, cols, width);
  out += "    " + BoxRow(bottom) + "\n";
  return out;
}

std::string DrawChain(int n) {
  return "Neuron Device Topology\n\n  " + BoxRow(AllDevices(n)) + "\n";
}

std::string DrawUnlinked(const Inventory& inv) {
  std::string out = "Neuron Device Topology\n\n ";
  // Appended piece by piece: `" " + Box(...)` (a literal before a temporary string) trips GCC
  // 12's -Wrestrict false positive at -O3 (GCC bug 105329) once inlined here.
  for (const NeuronDevice& d : inv.devices) {
    out += ' ';
    out += Box(d.index);
  }
  out += "  (no NeuronLink)\n";
  return out;
}

std::string DrawLinkList(const Inventory& inv) {
  std::string out = "Neuron Device Topology\n\n";
  std::set<std::pair<int, int>> links;
  for (const NeuronDevice& d : inv.devices) {
    for (const int n : d.connected) links.emplace(std::min(d.index, n), std::max(d.index, n));
  }
  for (const auto& [a, b] : links) out += "  " + BoxRow({a, b}) + "\n";
  return out;
}

}  // namespace

LinkLayout DetectLinkShape(const Inventory& inv) {
  LinkLayout layout;
  layout.size = Size(inv);
  const int n = layout.size;
  const bool any_links = std::any_of(inv.devices.begin(), inv.devices.end(),
                                     [](const NeuronDevice& d) { return !d.connected.empty(); });
  if (!any_links) {
    layout.shape = LinkShape::kNone;
  } else if (n == 16 && AllMatch(inv, TorusNeighbours)) {
    layout.shape = LinkShape::kTorus4x4;
  } else if (n >= 3 && AllMatch(inv, [n](int d) {
               return std::vector<int>{(d + n - 1) % n, (d + 1) % n};
             })) {
    layout.shape = LinkShape::kRing;
  } else if (n >= 2 && AllMatch(inv, [n](int d) {
               std::vector<int> e;
               if (d > 0) e.push_back(d - 1);
               if (d + 1 < n) e.push_back(d + 1);
               return e;
             })) {
    layout.shape = LinkShape::kChain;
  } else {
    layout.shape = LinkShape::kOther;
  }
  return layout;
}

std::vector<int> DisplayNeighbours(const NeuronDevice& device, const LinkLayout& layout) {
  if (layout.shape == LinkShape::kTorus4x4 && device.index >= 0 && device.index < 16) {
    return TorusNeighbours(device.index);
  }
  return device.connected;
}

std::string DrawTopology(const Inventory& inventory, const LinkLayout& layout) {
  switch (layout.shape) {
    case LinkShape::kTorus4x4:
      return DrawTorus();
    case LinkShape::kRing:
      return DrawRing(layout.size);
    case LinkShape::kChain:
      return DrawChain(layout.size);
    case LinkShape::kNone:
      return DrawUnlinked(inventory);
    case LinkShape::kOther:
      break;
  }
  return DrawLinkList(inventory);
}

}  // namespace neuron::top
