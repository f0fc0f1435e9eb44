// The upper sections of a frame: utilization grid, health, vCPU, memory summary
// (docs/tools-ux.md#top-layout, #health).

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "top/format.h"
#include "top/screen.h"

namespace neuron::top {
namespace {

int Ticks(int width, double fraction) {
  return std::clamp(static_cast<int>(std::lround(std::clamp(fraction, 0.0, 1.0) * width)), 0,
                    width);
}

// A bar `width` cells wide: `filled` ticks `|` in `fill` style, then blanks in `rest` style.
// The empty part is blank, not dim ticks, so that the bar reads right without colour (TERM=vt100,
// NO_COLOR, a plain capture): an idle core's bar is empty (docs/tools-ux.md#top-colours).
void Bar(Canvas& c, int y, int x, int width, int filled, Style fill, Style rest, const Rect& clip) {
  for (int i = 0; i < width; ++i) {
    c.Put(y, x + i, i < filled ? "|" : " ", i < filled ? fill : rest, clip);
  }
}

std::string CellValue(const CoreCell& cell, bool flops) {
  return "[" + (flops ? FormatTflops(cell.flops_per_s) : FormatPercent(cell.utilization)) + "]";
}

// docs/tools-ux.md Q2: devices but no runtime; each device shows its state instead of empty bars.
void PaintNoRuntime(Canvas& c, const Rect& r, const AppView& app, const GridGeometry& g,
                    int first) {
  c.Put(r.y + 1, r.x + g.label_width, "no Neuron runtime attached: no process holds a NeuronCore",
        Style::kWarning, r);
  for (int i = 0; i < g.visible_devices; ++i) {
    const DeviceRow& row = app.grid[static_cast<size_t>(first) + static_cast<size_t>(i)];
    const int y = r.y + 2 + i * g.lines_per_device;
    c.Put(y, r.x, fmt::format("ND{}", row.index), Style::kNormal, r);
    const std::string state =
        row.state ? std::string(DeviceStateName(*row.state)) : std::string("N/A");
    c.Put(y, r.x + g.label_width, state,
          row.state == DeviceState::kReady ? Style::kNormal : Style::kWarning, r);
  }
}

// One line of a device's cells, cores [line * cells_per_line, ...).
void PaintCells(Canvas& c, const Rect& r, int y, int line, const DeviceRow& row,
                const GridGeometry& g, bool flops, double peak) {
  for (int j = 0; j < g.cells_per_line; ++j) {
    const int k = line * g.cells_per_line + j;
    if (k >= static_cast<int>(row.cores.size())) break;
    const CoreCell& cell = row.cores[static_cast<size_t>(k)];
    const std::string value = CellValue(cell, flops);
    const int x = r.x + g.label_width + j * g.cell_width;
    const int bar_w = g.cell_width - 1 - static_cast<int>(value.size());
    if (bar_w > 0) {
      double fraction = cell.utilization.value_or(0);
      if (flops) fraction = peak > 0 ? cell.flops_per_s.value_or(0) / peak : 0;
      Bar(c, y, x, bar_w, Ticks(bar_w, fraction), Style::kBarFill, Style::kBarEmpty, r);
    }
    c.Put(y, x + std::max(0, bar_w), value, Style::kNormal, r);
  }
}

}  // namespace

void PaintGrid(Canvas& c, const Rect& r, const TopView& v, const AppView& app, const UiState& ui,
               const GridGeometry& g) {
  const int devices = static_cast<int>(app.grid.size());
  const int first = std::clamp(ui.grid_scroll, 0, std::max(0, devices - g.visible_devices));
  std::string title = ui.flops ? fmt::format("NeuronCore {} TFLOPs (Total: {})", v.nc_version,
                                             FormatTflops(app.total_flops_per_s))
                               : fmt::format("NeuronCore {} Utilization (Avg: {})", v.nc_version,
                                             FormatPercent(app.average_utilization));
  if (g.visible_devices < devices && g.visible_devices > 0) {
    title += fmt::format("   ND{}-ND{} of {} (PgUp/PgDn)", app.grid[first].index,
                         app.grid[first + g.visible_devices - 1].index, devices);
  }
  SectionTitle(c, r, title);
  if (r.h < 2) return;
  // Only when the runtimes' live data could be read: otherwise nobody knows whether a runtime
  // is there (the status line says why, the cells say N/A).
  if (!app.pid && v.runtime_attached.has_value() && !*v.runtime_attached) {
    PaintNoRuntime(c, r, app, g, first);
    return;
  }
  const int cores = std::max(1, v.cores_per_device);
  for (int j = 0; j < g.cells_per_line && j < cores; ++j) {
    const std::string nc = fmt::format("NC{}", j);
    const int x = r.x + g.label_width + j * g.cell_width;
    c.Put(r.y + 1, x + std::max(0, (g.cell_width - static_cast<int>(nc.size())) / 2), nc,
          Style::kNormal, r);
  }
  for (int i = 0; i < g.visible_devices; ++i) {
    const DeviceRow& row = app.grid[static_cast<size_t>(first) + static_cast<size_t>(i)];
    // An unknown state (reset is root-only: a normal user's view) still shows the core figures.
    const bool ready = !row.state.has_value() || *row.state == DeviceState::kReady;
    const bool ecc = row.ecc_errors.value_or(0) > 0;
    const int y0 = r.y + 2 + i * g.lines_per_device;
    if (y0 >= r.y + r.h) return;
    c.Put(y0, r.x, fmt::format("ND{}{}", row.index, ecc ? "!" : ""),
          ready && !ecc ? Style::kNormal : Style::kWarning, r);
    if (!ready) {
      c.Put(y0, r.x + g.label_width, "device " + std::string(DeviceStateName(*row.state)),
            Style::kWarning, r);
      continue;
    }
    for (int line = 0; line < g.lines_per_device && y0 + line < r.y + r.h; ++line) {
      PaintCells(c, r, y0 + line, line, row, g, ui.flops, v.peak_flops_per_core.value_or(0));
    }
  }
}

void PaintHealth(Canvas& c, const Rect& r, const TopView& v) {
  SectionTitle(c, r, HealthSummary(v.health));
  const std::vector<const HealthRow*> rows = NotHealthy(v.health);
  for (int i = 0; i + 1 < r.h && i < static_cast<int>(rows.size()); ++i) {
    const int y = r.y + 1 + i;
    const int left = static_cast<int>(rows.size()) - i;
    if (i + 2 == r.h && left > 1) {
      c.Put(y, r.x, fmt::format("... {} more not healthy (--snapshot lists them all)", left),
            Style::kWarning, r);
      return;
    }
    const HealthRow& row = *rows[static_cast<size_t>(i)];
    const std::string who = row.efa.empty() ? fmt::format("ND{}", row.device) : row.efa;
    const int x = c.Put(y, r.x, fmt::format("{:<6}", who), Style::kNormal, r);
    c.Put(y, x + 1, HealthText(row),
          row.state == HealthState::kHealthy ? Style::kNormal : Style::kWarning, r);
  }
}

void PaintStatus(Canvas& c, const Rect& r, const TopView& v) {
  const std::vector<std::string> lines = StatusLines(v);
  for (int i = 0; i < r.h && i < static_cast<int>(lines.size()); ++i) {
    const std::string text =
        TruncateEllipsis(lines[static_cast<size_t>(i)], static_cast<size_t>(r.w));
    c.Put(r.y + i, r.x, text, Style::kWarning, r);
  }
}

void PaintVcpu(Canvas& c, const Rect& r, const TopView& v, const AppView& app) {
  SectionTitle(c, r, "vCPU Utilization");
  struct Line {
    std::string_view label;
    const CpuUsage& usage;
  };
  const Line lines[] = {{"System vCPU Usage  ", v.system_cpu},
                        {"Runtime vCPU Usage ", app.runtime_cpu}};
  for (int i = 0; i < 2 && i + 1 < r.h; ++i) {
    const int y = r.y + 1 + i;
    const CpuUsage& u = lines[i].usage;
    // "[%5.2f%%,%5.2f%%]" as neuron-top prints it (docs/tools-ux.md#top-layout item 3).
    const std::string value =
        u.user && u.system ? fmt::format("[{:5.2f}%,{:5.2f}%]", *u.user * 100.0, *u.system * 100.0)
                           : std::string("[  N/A ,  N/A ]");
    int x = c.Put(y, r.x, lines[i].label, Style::kNormal, r);
    const int bar_w = r.x + r.w - x - 1 - static_cast<int>(value.size());
    if (bar_w > 0) {
      const int user = Ticks(bar_w, u.user.value_or(0));
      const int sys = std::min(bar_w - user, Ticks(bar_w, u.system.value_or(0)));
      Bar(c, y, x, user, user, Style::kBarFill, Style::kBarFill, r);
      Bar(c, y, x + user, sys, sys, Style::kSystemBar, Style::kSystemBar, r);
      x += bar_w;
    }
    c.Put(y, x + 1, value, Style::kNormal, r);
  }
}

void PaintMemorySummary(Canvas& c, const Rect& r, const AppView& app) {
  SectionTitle(c, r, "Memory Usage Summary");
  struct Field {
    std::string_view name;
    std::optional<uint64_t> bytes;
  };
  auto line = [&](int y, std::string_view label, const std::vector<Field>& fields) {
    int x = c.Put(y, r.x, label, Style::kNormal, r);
    for (const Field& f : fields) {
      x = c.Put(y, x, fmt::format("{}: ", f.name), Style::kNormal, r);
      const std::string value = FormatSize(f.bytes);
      c.Put(y, x, value, Style::kValue, r);
      x += std::max(9, static_cast<int>(value.size()) + 2);
    }
  };
  if (r.h > 1) {
    line(r.y + 1, "Host Used Memory    ",
         {{"Total", app.host.total},
          {"Tensors", app.host.tensors},
          {"Constants", app.host.constants},
          {"DMA Buffers", app.host.dma_buffers},
          {"App. Memory", app.host.app_memory}});
  }
  if (r.h > 2) {
    const CategoryBytes& cat = app.device.categories;
    line(r.y + 2, "Device Used Memory  ",
         {{"Total", app.device.total},
          {"Tensors", cat[kTensors]},
          {"Constants", cat[kConstants]},
          {"Model Code", cat[kModelCode]},
          {"Runtime Memory", cat[kRuntimeMemory]},
          {"Model Scratchpad", cat[kScratchpad]}});
  }
}

}  // namespace neuron::top
