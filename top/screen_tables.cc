// The lower sections of a frame: memory details tree (docs/tools-ux.md#top-layout item 5), the
// history chart and the process table (docs/tools-ux.md#nvtop: nvtop features adopted).

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "top/format.h"
#include "top/screen.h"

namespace neuron::top {
namespace {

// U+2581..U+2588: eighths of a cell, bottom up.
constexpr std::u32string_view kBlocks = U"▁▂▃▄▅▆▇█";

void Plot(Canvas& c, const Rect& r, std::string_view title,
          const std::vector<std::optional<double>>& series, Style style) {
  SectionTitle(c, r, title);
  const int rows = r.h - 1;
  constexpr int kAxis = 5;  // "100% "
  const int cols = r.w - kAxis;
  if (rows < 1 || cols < 1) return;
  c.Put(r.y + 1, r.x, "100%", Style::kNormal, r);
  c.Put(r.y + rows, r.x, "  0%", Style::kNormal, r);
  const size_t n = series.size();
  const size_t shown = std::min(n, static_cast<size_t>(cols));
  for (size_t i = 0; i < shown; ++i) {
    const std::optional<double>& v = series[n - shown + i];
    if (!v) continue;
    // Newest on the right.
    const int x = r.x + r.w - static_cast<int>(shown) + static_cast<int>(i);
    int eighths = static_cast<int>(std::lround(std::clamp(*v, 0.0, 1.0) * rows * 8));
    for (int row = 0; row < rows && eighths > 0; ++row) {
      const int here = std::min(8, eighths);
      eighths -= here;
      std::string ch;
      AppendUtf8(kBlocks[static_cast<size_t>(here - 1)], &ch);
      c.Put(r.y + rows - row, x, ch, style, r);
    }
  }
}

std::string PodText(const ProcessRow& p) {
  if (!p.pod_known) return "N/A";
  if (!p.pod) return "-";
  if (p.pod->name) return *p.pod->name;
  return p.pod->uid.empty() ? "N/A" : p.pod->uid;
}

std::string NamespaceText(const ProcessRow& p) {
  if (!p.pod_known) return "N/A";
  if (!p.pod) return "-";
  return p.pod->namespace_name.value_or("N/A");
}

std::string Ratio(std::optional<double> v) {
  return v ? fmt::format("{:.1f}", *v * 100.0) : std::string("N/A");
}

// The process table's columns: fixed widths and COMMAND, which takes the rest.
struct Col {
  std::string_view name;
  int width;
  bool right;
  int priority;  // higher stays longer
  std::string (*value)(const ProcessRow&);
};

// The columns that fit `width`: on narrow screens those of lowest priority go first.
std::vector<const Col*> ColumnsFitting(int width) {
  static const Col kColumns[] = {
      {"PID", 8, true, 100, [](const ProcessRow& p) { return std::to_string(p.pid); }},
      {"POD", 20, false, 9, PodText},
      {"NAMESPACE", 12, false, 3, NamespaceText},
      {"DEVICES", 8, false, 4,
       [](const ProcessRow& p) { return p.devices.empty() ? "-" : FormatRanges(p.devices); }},
      {"CORES", 8, false, 6,
       [](const ProcessRow& p) { return p.core_ids.empty() ? "-" : FormatRanges(p.core_ids); }},
      {"DEV MEM", 9, true, 7, [](const ProcessRow& p) { return FormatSize(p.device_bytes); }},
      {"HOST MEM", 9, true, 2, [](const ProcessRow& p) { return FormatSize(p.host_bytes); }},
      {"CPU%", 7, true, 5, [](const ProcessRow& p) { return Ratio(p.cpu); }},
      {"UTIL%", 7, true, 8, [](const ProcessRow& p) { return Ratio(p.utilization); }},
      {"COMMAND", 0, false, 1000,  // flexible: takes what the others leave
       [](const ProcessRow& p) { return p.command.empty() ? std::string("N/A") : p.command; }},
  };
  constexpr int kCommandMin = 10;
  std::vector<const Col*> cols;
  for (const Col& col : kColumns) cols.push_back(&col);
  auto fixed = [&cols] {
    int sum = 0;
    for (const Col* col : cols) sum += col->width;
    return sum;
  };
  while (cols.size() > 1 && fixed() + kCommandMin > width) {
    auto lowest = std::min_element(cols.begin(), cols.end(), [](const Col* a, const Col* b) {
      return a->priority < b->priority;
    });
    cols.erase(lowest);
  }
  return cols;
}

}  // namespace

void PaintTree(Canvas& c, const Rect& r, const AppView& app, const UiState& ui) {
  SectionTitle(c, r, "Memory Usage Details");
  if (r.h < 2) return;
  const int col_host = r.x + r.w - 14;
  const int col_dev = col_host - 16;
  const int col_model = r.w >= 60 ? col_dev - 13 : -1;
  const int y_head = r.y + 1;
  if (col_model >= r.x) c.Put(y_head, col_model, "Model ID", Style::kNormal, r);
  c.Put(y_head, col_dev, "Device Memory", Style::kNormal, r);
  c.Put(y_head, col_host, "Host Memory", Style::kNormal, r);
  const std::vector<TreeRow> rows = FlattenTree(app, ui.expanded);
  const int visible = r.h - 2;
  if (rows.empty()) {
    if (visible > 0) c.Put(r.y + 2, r.x + 1, "no device memory in use", Style::kNormal, r);
    return;
  }
  const int selected = SelectedRow(ui, rows);
  const int first = std::max(0, selected - visible + 1);
  for (int i = 0; i < visible && first + i < static_cast<int>(rows.size()); ++i) {
    const TreeRow& row = rows[static_cast<size_t>(first + i)];
    const int y = r.y + 2 + i;
    const int x = r.x + 1 + row.depth * 4;
    std::string label = row.expandable ? (row.expanded ? "[-] " : "[+] ") : "";
    label += row.label;
    const int label_end =
        (col_model >= r.x && row.kind == TreeRowKind::kModel ? col_model : col_dev) - 1;
    const int room = std::max(0, label_end - x);
    const Style style = row.kind == TreeRowKind::kModel ? Style::kModel : Style::kNormal;
    c.Put(y, x, TruncateEllipsis(label, static_cast<size_t>(room)), style,
          Rect{y, r.x, 1, std::max(0, label_end - r.x)});
    if (col_model >= r.x && !row.model_id.empty()) c.Put(y, col_model, row.model_id, style, r);
    c.Put(y, col_dev, FormatSize(row.device_bytes), Style::kNormal, r);
    c.Put(y, col_host, FormatSize(row.host_bytes), Style::kNormal, r);
    if (first + i == selected) c.Restyle(Rect{y, r.x, 1, r.w}, Style::kSelected);
  }
}

void PaintChart(Canvas& c, const Rect& r, const TopView& v) {
  if (r.w >= 2 * 30 + 1) {
    const int left_w = (r.w - 1) / 2;
    Plot(c, Rect{r.y, r.x, r.h, left_w}, "NeuronCore utilization history (avg)",
         v.history.utilization, Style::kChartUtil);
    Plot(c, Rect{r.y, r.x + left_w + 1, r.h, r.w - left_w - 1}, "Device memory used (HBM)",
         v.history.device_memory, Style::kChartMem);
    return;
  }
  Plot(c, r, "NeuronCore utilization history (avg)", v.history.utilization, Style::kChartUtil);
}

void PaintProcesses(Canvas& c, const Rect& r, const TopView& v, const UiState& ui) {
  const std::vector<const Col*> cols = ColumnsFitting(r.w);
  std::vector<std::pair<int, int>> spans;  // x, width per shown column
  int x = r.x;
  for (const Col* col : cols) {
    const int w = col->width > 0 ? col->width : r.x + r.w - x;
    spans.emplace_back(x, std::max(0, std::min(w, r.x + r.w - x)));
    x += w;
  }
  c.Fill(Rect{r.y, r.x, 1, r.w}, Style::kHeader);
  for (size_t k = 0; k < cols.size(); ++k) {
    std::string name(cols[k]->name);
    if (name == SortKeyName(ui.sort)) name += ui.descending ? "▼" : "▲";
    const auto [cx, w] = spans[k];
    const int nx = cols[k]->right ? cx + w - 1 - static_cast<int>(DisplayWidth(name)) : cx;
    c.Put(r.y, std::max(cx, nx), name, Style::kHeader, Rect{r.y, cx, 1, w});
  }
  const std::vector<const ProcessRow*> rows = SortedProcesses(v, ui.sort, ui.descending);
  if (rows.empty()) {
    // Without live data nobody knows whether a runtime is there
    // (docs/architecture.md#unknown-is-not-zero).
    const std::string_view why = v.runtime_attached.has_value()
                                     ? "no Neuron runtime attached"
                                     : "processes unknown: live data unavailable (see the top)";
    if (r.h > 1) c.Put(r.y + 1, r.x + 1, why, Style::kWarning, r);
    return;
  }
  const int visible = r.h - 1;
  for (int i = 0; i < visible && i < static_cast<int>(rows.size()); ++i) {
    const int y = r.y + 1 + i;
    if (i == visible - 1 && static_cast<int>(rows.size()) > visible) {
      c.Put(y, r.x + 1, fmt::format("... {} more", rows.size() - static_cast<size_t>(i)),
            Style::kNormal, r);
      break;
    }
    const ProcessRow& p = *rows[static_cast<size_t>(i)];
    for (size_t k = 0; k < cols.size(); ++k) {
      const auto [cx, w] = spans[k];
      if (w <= 1) continue;
      const std::string text = TruncateEllipsis(cols[k]->value(p), static_cast<size_t>(w - 1));
      const int tx = cols[k]->right ? cx + w - 1 - static_cast<int>(DisplayWidth(text)) : cx;
      c.Put(y, tx, text, Style::kNormal, Rect{y, cx, 1, w});
    }
  }
}

}  // namespace neuron::top
