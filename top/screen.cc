#include "top/screen.h"

#include <fmt/format.h>

#include <algorithm>

#include "top/format.h"

namespace neuron::top {
namespace {

constexpr std::string_view kHelp =
    "q: quit   arrows: move tree selection   enter: expand/collapse tree   x: expand/collapse "
    "entire tree   a/d: previous/next tab   f: FLOPS on/off   1-9: select tab   s: sort   "
    "r: reverse   PgUp/PgDn: scroll devices";

void Centered(Canvas& c, const Rect& r, int y, std::string_view text, Style style) {
  const int len = static_cast<int>(DisplayWidth(text));
  c.Put(y, r.x + std::max(0, (r.w - len) / 2), text, style, r);
}

void PaintTitle(Canvas& c, const Rect& r, const TopView* v, std::string_view version) {
  c.Fill(r, Style::kTitle);
  std::string text = fmt::format("neuron-top {}", version);
  if (v != nullptr) {
    text += fmt::format(" running on {} ({})", v->instance_id.empty() ? "N/A" : v->instance_id,
                        v->instance_type.empty() ? "N/A" : v->instance_type);
  }
  Centered(c, r, r.y, text, Style::kTitle);
}

// Tab texts "[n]:label", shortened until the bar fits.
std::vector<std::string> TabTexts(const TopView& v, size_t label_max) {
  std::vector<std::string> out;
  for (size_t i = 0; i < v.apps.size(); ++i) {
    out.push_back(fmt::format("[{}]:{}", i + 1, TruncateEllipsis(v.apps[i].label, label_max)));
  }
  return out;
}

}  // namespace

void PaintTabs(Canvas& c, const Rect& r, const TopView& v, const UiState& ui) {
  c.Fill(r, Style::kTabBar);
  c.Put(r.y, r.x, "Neuron Apps", Style::kTabLabel, r);
  const int start = r.x + std::min(21, std::max(12, r.w / 8));
  const int room = r.x + r.w - start;
  const int current = TabIndex(ui, v);
  std::vector<std::string> texts;
  int total = 0;
  for (const size_t label_max : {32u, 16u, 8u}) {
    texts = TabTexts(v, label_max);
    total = 0;
    for (const std::string& t : texts) total += static_cast<int>(DisplayWidth(t)) + 3;
    if (total <= room) break;
  }
  // When the tabs still do not fit, show a window that holds the current one (docs/tools-ux.md Q7:
  // tab names must not vanish).
  size_t first = 0;
  if (total > room) {
    int width = 0;
    first = static_cast<size_t>(current);
    while (first > 0 && width + static_cast<int>(DisplayWidth(texts[first - 1])) + 3 < room / 2) {
      --first;
      width += static_cast<int>(DisplayWidth(texts[first])) + 3;
    }
  }
  int x = start;
  if (first > 0) x = c.Put(r.y, x, "< ", Style::kTabBar, r);
  for (size_t i = first; i < texts.size(); ++i) {
    const bool active = static_cast<int>(i) == current;
    const std::string t = active ? ">" + texts[i] + "<" : " " + texts[i] + " ";
    if (x + static_cast<int>(DisplayWidth(t)) > r.x + r.w) {
      c.Put(r.y, r.x + r.w - 1, ">", Style::kTabBar, r);
      break;
    }
    x = c.Put(r.y, x, t, active ? Style::kTabActive : Style::kTabBar, r) + 1;
  }
}

std::vector<std::string> StatusLines(const TopView& v) {
  std::vector<std::string> out;
  const std::string problem = LiveDataProblem(v.datastore_source);
  if (!problem.empty()) {
    // The consequence first: a narrow terminal cuts the end of the line.
    out.push_back(fmt::format("live data {} (utilization and processes N/A): {}",
                              v.datastore_source.known ? "unavailable" : "unknown", problem));
  }
  out.insert(out.end(), v.notes.begin(), v.notes.end());
  // Health judged without the agent: once, here, not on every device's line.
  if (!v.health.notice.empty()) out.push_back(v.health.notice);
  if (v.health.stale) {
    out.push_back(
        fmt::format("health from the agent at {} is stale: its evidence is old", v.health.agent));
  }
  return out;
}

LayoutRequest RequestFor(const TopView* view, const UiState& ui, int width, int height) {
  LayoutRequest req;
  req.width = width;
  req.height = height;
  req.status_lines = view != nullptr ? static_cast<int>(StatusLines(*view).size()) : 0;
  if (view != nullptr && view->health.known) {
    req.health_rows = 1 + static_cast<int>(NotHealthy(view->health).size());
  }
  if (view == nullptr || view->apps.empty()) {
    req.devices = 0;
    req.cores_per_device = 1;
    req.tree_rows = 0;
    req.process_rows = 0;
    req.max_device_index = 0;
    return req;
  }
  const AppView& all = view->apps.front();
  req.devices = static_cast<int>(all.grid.size());
  req.cores_per_device = std::max(1, view->cores_per_device);
  req.max_device_index = all.grid.empty() ? 0 : all.grid.back().index;
  const AppView& app = view->apps[static_cast<size_t>(TabIndex(ui, *view))];
  req.tree_rows = static_cast<int>(FlattenTree(app, ui.expanded).size());
  req.process_rows = static_cast<int>(view->processes.size());
  return req;
}

Canvas Paint(const TopView* view, const UiState& ui, const Layout& l, std::string_view version) {
  Canvas c(l.width, l.height);
  if (l.too_small) {
    if (!l.message.empty()) {
      const std::string msg = fmt::format("terminal too small ({}x{}); neuron-top needs {}x{}",
                                          l.width, l.height, kMinWidth, kMinHeight);
      Centered(c, l.message, l.message.y + l.message.h / 2, msg, Style::kWarning);
    }
    return c;
  }
  PaintTitle(c, l.title, view, version);
  c.Put(l.help.y, l.help.x, kHelp, Style::kNormal, l.help);
  if (view == nullptr || view->apps.empty()) {
    Centered(c, l.grid, l.grid.y + 1, "collecting...", Style::kNormal);
    return c;
  }
  const AppView& app = view->apps[static_cast<size_t>(TabIndex(ui, *view))];
  if (!l.status.empty()) PaintStatus(c, l.status, *view);
  if (!l.grid.empty()) PaintGrid(c, l.grid, *view, app, ui, l.grid_geometry);
  if (!l.health.empty()) PaintHealth(c, l.health, *view);
  if (!l.vcpu.empty()) PaintVcpu(c, l.vcpu, *view, app);
  if (!l.memory.empty()) PaintMemorySummary(c, l.memory, app);
  if (!l.tree.empty()) PaintTree(c, l.tree, app, ui);
  if (!l.chart.empty()) PaintChart(c, l.chart, *view);
  if (!l.processes.empty()) PaintProcesses(c, l.processes, *view, ui);
  if (!l.tabs.empty()) PaintTabs(c, l.tabs, *view, ui);
  return c;
}

}  // namespace neuron::top
