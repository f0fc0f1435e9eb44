#include "top/layout.h"

#include <algorithm>
#include <string>

namespace neuron::top {
namespace {

constexpr int kVcpuHeight = 3;    // title, System, Runtime
constexpr int kMemoryHeight = 3;  // title, Host, Device
constexpr int kTreeMin = 3;       // title, column header, one row
constexpr int kProcessMin = 2;    // column header, one row
constexpr int kChartMin = 4;      // title and three rows of plot
constexpr int kChartWant = 9;
constexpr int kChartMax = 14;

GridGeometry Geometry(int width, const LayoutRequest& r) {
  GridGeometry g;
  g.label_width =
      static_cast<int>(("ND" + std::to_string(std::max(0, r.max_device_index))).size()) + 1;
  const int cores = std::max(1, r.cores_per_device);
  const int usable = std::max(1, width - g.label_width);
  g.cells_per_line = std::clamp(usable / kMinCellWidth, 1, cores);
  g.lines_per_device = (cores + g.cells_per_line - 1) / g.cells_per_line;
  g.cell_width = usable / g.cells_per_line;
  return g;
}

struct Item {
  Rect* rect;
  int min;
  int want;
  int given = 0;
};

// Gives each item its minimum in priority order while room lasts, then tops them up to what
// they want in the same order. Returns what is left.
int Allocate(std::vector<Item>& items, int room) {
  for (Item& it : items) {
    if (room >= it.min && it.min > 0) {
      it.given = it.min;
      room -= it.min;
    }
  }
  for (Item& it : items) {
    if (it.given == 0) continue;
    const int extra = std::min(room, std::max(0, it.want - it.given));
    it.given += extra;
    room -= extra;
  }
  return room;
}

// Stacks the given items from `y` down in the order listed.
void Stack(std::vector<Item>& items, int y, int x, int w) {
  for (Item& it : items) {
    if (it.given <= 0) continue;
    *it.rect = Rect{y, x, it.given, w};
    y += it.given;
  }
}

// One column: the tree, the chart and the process table share the `room` rows from `y` down.
void StackLowerSections(const LayoutRequest& r, int y, int room, int width, Layout* l) {
  const int tree_want = 2 + std::max(1, r.tree_rows);
  const int process_want = 1 + std::max(1, r.process_rows);
  std::vector<Item> items{{&l->tree, kTreeMin, tree_want},
                          {&l->processes, kProcessMin, process_want},
                          {&l->chart, kChartMin, kChartWant}};
  room = Allocate(items, room);
  // Leftover rows go to the tree (it may scroll later as nodes open), else the chart.
  for (Item* it : {&items[0], &items[2], &items[1]}) {
    if (it->given > 0) {
      it->given += room;
      break;
    }
  }
  std::vector<Item> order{items[0], items[2], items[1]};  // tree, chart, processes
  Stack(order, y, 0, width);
}

// Under the grid, while room lasts: health (part of it if need be: which devices are at fault
// matters more than how busy the CPUs are), vCPU, the memory summary. Advances `y`, spends `room`.
void StackMiddleSections(int health_want, int width, int* y, int* room, Layout* l) {
  if (health_want > 0 && *room > 0) {
    const int h = std::min(*room, health_want);
    l->health = Rect{*y, 0, h, width};
    *y += h;
    *room -= h;
  }
  for (const auto& [rect, height] :
       {std::pair{&l->vcpu, kVcpuHeight}, std::pair{&l->memory, kMemoryHeight}}) {
    if (*room < height) break;
    *rect = Rect{*y, 0, height, width};
    *y += height;
    *room -= height;
  }
}

}  // namespace

Layout ComputeLayout(const LayoutRequest& r) {
  Layout l;
  l.width = r.width;
  l.height = r.height;
  if (r.width < kMinWidth || r.height < kMinHeight) {
    l.too_small = true;
    if (r.width > 0 && r.height > 0) l.message = Rect{0, 0, r.height, r.width};
    return l;
  }
  const int w = r.width;
  const int h = r.height;
  l.title = Rect{0, 0, 1, w};
  l.tabs = Rect{h - 2, 0, 1, w};
  l.help = Rect{h - 1, 0, 1, w};
  // Status lines never take the grid's title, header and first device row.
  const int status_h = std::clamp(std::min(r.status_lines, kMaxStatusLines), 0, h - 3 - 3);
  if (status_h > 0) l.status = Rect{1, 0, status_h, w};
  const int top = 1 + status_h;
  const int avail = h - 3 - status_h;

  l.two_columns = w >= kTwoColumnWidth;
  int left_w = w;
  int right_w = 0;
  if (l.two_columns) {
    right_w = std::clamp(w * 2 / 5, 60, 110);
    left_w = w - right_w - 1;  // one blank column between them
  }

  GridGeometry g = Geometry(left_w, r);
  const int devices = std::max(0, r.devices);
  const int grid_full = 2 + devices * g.lines_per_device;
  const int health_want = std::min(std::max(0, r.health_rows), kMaxHealthLines);
  int grid_h = grid_full;
  if (grid_full > avail) {
    // Scrolled: keep room for the health summary, vCPU and memory summary when the screen allows.
    const int keep = std::min(health_want, 1) + kVcpuHeight + kMemoryHeight;
    grid_h = std::min(avail, std::max(2 + g.lines_per_device, avail - keep));
  }
  g.visible_devices = std::min(devices, std::max(0, (grid_h - 2) / g.lines_per_device));
  l.grid_geometry = g;
  l.grid = Rect{top, 0, grid_h, left_w};

  int y = top + grid_h;
  int room = avail - grid_h;
  StackMiddleSections(health_want, left_w, &y, &room, &l);
  if (!l.two_columns) {
    StackLowerSections(r, y, room, left_w, &l);
    return l;
  }
  if (room >= kTreeMin) l.tree = Rect{y, 0, room, left_w};
  const int right_x = left_w + 1;
  int chart_h = 0;
  if (avail >= kChartMin + kProcessMin) chart_h = std::clamp(avail / 3, kChartMin, kChartMax);
  if (chart_h > 0) l.chart = Rect{top, right_x, chart_h, right_w};
  const int proc_h = avail - chart_h;
  if (proc_h >= kProcessMin) l.processes = Rect{top + chart_h, right_x, proc_h, right_w};
  return l;
}

std::vector<Rect> VisibleRects(const Layout& l) {
  std::vector<Rect> out;
  if (l.too_small) {
    if (!l.message.empty()) out.push_back(l.message);
    return out;
  }
  for (const Rect* r : {&l.title, &l.status, &l.grid, &l.health, &l.vcpu, &l.memory, &l.tree,
                        &l.chart, &l.processes, &l.tabs, &l.help}) {
    if (!r->empty()) out.push_back(*r);
  }
  return out;
}

}  // namespace neuron::top
