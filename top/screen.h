#pragma once
// Paints one neuron-top frame onto a Canvas (docs/tools-ux.md#top-layout layout, plus the history
// chart and the process table): pure, so frames are testable as text; the ncurses renderer copies
// the canvas to the terminal. Thread-safe (no state).

#include <string>
#include <string_view>
#include <vector>

#include "top/canvas.h"
#include "top/layout.h"
#include "top/ui_state.h"
#include "top/view_model.h"

namespace neuron::top {

// The layout request for a view on a terminal of the given size. `view` may be null (before
// the first sample).
LayoutRequest RequestFor(const TopView* view, const UiState& ui, int width, int height);

// Paints a full frame. `version` goes into the title bar.
Canvas Paint(const TopView* view, const UiState& ui, const Layout& layout,
             std::string_view version);

// What the status lines say, one problem each: live data that could not be read
// (docs/architecture.md#unknown-is-not-zero), then the view's notes (root-only files the catalog
// stood in for), then health judged without the agent (docs/tools-ux.md#health). Empty when all
// is read.
std::vector<std::string> StatusLines(const TopView& view);

// The sections, each drawing only inside its rectangle. The status line, the grid, vCPU and the
// memory summary live in screen_sections.cc;
void PaintStatus(Canvas& c, const Rect& r, const TopView& v);
void PaintGrid(Canvas& c, const Rect& r, const TopView& v, const AppView& app, const UiState& ui,
               const GridGeometry& g);
// Health: the summary, then a line per device or EFA interface that is not healthy.
void PaintHealth(Canvas& c, const Rect& r, const TopView& v);
void PaintVcpu(Canvas& c, const Rect& r, const TopView& v, const AppView& app);
void PaintMemorySummary(Canvas& c, const Rect& r, const AppView& app);
// the memory tree, the history chart and the process table in screen_tables.cc;
void PaintTree(Canvas& c, const Rect& r, const AppView& app, const UiState& ui);
void PaintChart(Canvas& c, const Rect& r, const TopView& v);
void PaintProcesses(Canvas& c, const Rect& r, const TopView& v, const UiState& ui);
// the tab bar, with the title and Paint itself, in screen.cc.
void PaintTabs(Canvas& c, const Rect& r, const TopView& v, const UiState& ui);

}  // namespace neuron::top
