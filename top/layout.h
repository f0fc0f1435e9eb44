#pragma once
// neuron-top's screen layout as a pure function of the terminal size and the view's shape
// (docs/tools-ux.md#top-layout, #requirements Q7; nvtop's compute_sizes_from_layout). Sections
// never overlap and never leave the screen; what does not fit is hidden or scrolled, and below a
// minimum size only a "terminal too small" message is shown. tests/top/layout_test.cc checks every
// size from 80x24 to 300x100. Thread-safe (no state).
//
// Top to bottom: title bar; status lines when something could not be read; per-core utilization
// grid; health; vCPU; memory summary; memory details tree; then (beside the left column on wide
// terminals, below it otherwise) the history chart and the process table; the tab bar and the
// key help line at the bottom.

#include <vector>

namespace neuron::top {

struct Rect {
  int y = 0;
  int x = 0;
  int h = 0;
  int w = 0;
  bool empty() const { return h <= 0 || w <= 0; }
  bool operator==(const Rect&) const = default;
};

struct LayoutRequest {
  int width = 80;
  int height = 24;
  int devices = 16;
  int cores_per_device = 2;
  int tree_rows = 16;    // rows of the flattened memory tree (without its two header lines)
  int process_rows = 0;  // processes in the table
  int max_device_index = 15;
  int status_lines = 0;  // problems to show under the title (what could not be read)
  // Lines the health section wants (its summary, then one per device or EFA interface that is
  // not healthy); 0: no section.
  int health_rows = 0;
};

struct GridGeometry {
  int label_width = 5;     // "ND15 "
  int cells_per_line = 1;  // cores drawn side by side
  int lines_per_device = 1;
  int cell_width = 12;      // bar + value + one space
  int visible_devices = 0;  // device rows that fit (the rest scroll)
};

struct Layout {
  int width = 0;
  int height = 0;
  bool too_small = false;  // only `message` is used
  Rect message;
  Rect title;
  Rect status;  // under the title, one line per problem (at most kMaxStatusLines)
  Rect grid;    // section title + NC header + device lines
  Rect health;  // summary + the devices that are not healthy (at most kMaxHealthLines)
  Rect vcpu;
  Rect memory;
  Rect tree;
  Rect chart;
  Rect processes;
  Rect tabs;
  Rect help;
  GridGeometry grid_geometry;
  bool two_columns = false;
};

// Smaller terminals get only the message.
inline constexpr int kMinWidth = 40;
inline constexpr int kMinHeight = 10;
// Narrowest core cell: "[158.00TF]" (10) + a bar of one tick + a space.
inline constexpr int kMinCellWidth = 12;
// Problems shown at once; the rest are in the log file and --snapshot.
inline constexpr int kMaxStatusLines = 3;
// Health lines shown at once, the summary included; the rest are in --snapshot.
inline constexpr int kMaxHealthLines = 5;
// From this width the chart and the process table move beside the left column.
inline constexpr int kTwoColumnWidth = 160;

Layout ComputeLayout(const LayoutRequest& request);

// The rectangles a Layout shows (non-empty ones), for drawing and tests.
std::vector<Rect> VisibleRects(const Layout& layout);

}  // namespace neuron::top
