#include "top/ui_state.h"

#include <fmt/format.h>

#include <algorithm>

namespace neuron::top {
namespace {

const AppView* CurrentApp(const UiState& ui, const TopView* view) {
  if (view == nullptr || view->apps.empty()) return nullptr;
  return &view->apps[static_cast<size_t>(TabIndex(ui, *view))];
}

void SelectTab(UiState& ui, const TopView& view, int index) {
  if (index < 0 || index >= static_cast<int>(view.apps.size())) return;
  ui.tab_pid = view.apps[static_cast<size_t>(index)].pid;
}

// Every expandable key of the app's tree.
std::set<std::string> AllKeys(const AppView& app) {
  std::set<std::string> everything;
  for (const DeviceMemoryNode& n : app.memory_tree) {
    for (const CoreMemory& c : n.cores) {
      for (const ModelMemory& m : c.models) {
        everything.insert(fmt::format("d{}/c{}/m{}.{}", n.index, c.local_index, m.pid, m.model_id));
      }
      everything.insert(fmt::format("d{}/c{}", n.index, c.local_index));
    }
    everything.insert(fmt::format("d{}", n.index));
  }
  return everything;
}

// Ascending by `key`; absent values last whatever the direction.
template <typename T>
int Compare(const std::optional<T>& a, const std::optional<T>& b) {
  if (a.has_value() != b.has_value()) return a.has_value() ? -2 : 2;  // absent last, always
  if (!a) return 0;
  return *a < *b ? -1 : (*b < *a ? 1 : 0);
}

std::optional<std::string> PodName(const ProcessRow& p) {
  if (!p.pod) return std::nullopt;
  return p.pod->name.value_or(p.pod->uid);
}

}  // namespace

int TabIndex(const UiState& ui, const TopView& view) {
  if (!ui.tab_pid) return 0;
  for (size_t i = 0; i < view.apps.size(); ++i) {
    if (view.apps[i].pid == ui.tab_pid) return static_cast<int>(i);
  }
  return 0;
}

std::vector<TreeRow> FlattenTree(const AppView& app, const std::set<std::string>& expanded) {
  std::vector<TreeRow> rows;
  auto category_rows = [&rows](const std::string& parent, int depth, const CategoryBytes& cats) {
    for (int c = 0; c < kDeviceCategoryCount; ++c) {
      TreeRow r;
      r.kind = TreeRowKind::kCategory;
      r.depth = depth;
      r.key = fmt::format("{}/k{}", parent, c);
      r.label = std::string(kDeviceCategoryLabels[static_cast<size_t>(c)]);
      r.device_bytes = cats[static_cast<size_t>(c)];
      rows.push_back(std::move(r));
    }
  };
  for (const DeviceMemoryNode& n : app.memory_tree) {
    TreeRow d;
    d.kind = TreeRowKind::kDevice;
    d.key = fmt::format("d{}", n.index);
    d.label = fmt::format("ND{:2d}", n.index);
    d.device_bytes = n.device_bytes;
    d.host_bytes = n.host_bytes;
    d.expandable = !n.cores.empty();
    d.expanded = d.expandable && expanded.contains(d.key);
    rows.push_back(d);
    if (!d.expanded) continue;
    for (const CoreMemory& c : n.cores) {
      TreeRow cr;
      cr.kind = TreeRowKind::kCore;
      cr.depth = 1;
      cr.key = fmt::format("{}/c{}", d.key, c.local_index);
      cr.label = fmt::format("NC{:2d}", c.local_index);
      cr.device_bytes = c.device_bytes;
      cr.host_bytes = c.host_bytes;
      cr.expandable = true;
      cr.expanded = expanded.contains(cr.key);
      rows.push_back(cr);
      if (!cr.expanded) continue;
      for (const ModelMemory& m : c.models) {
        TreeRow mr;
        mr.kind = TreeRowKind::kModel;
        mr.depth = 2;
        mr.key = fmt::format("{}/m{}.{}", cr.key, m.pid, m.model_id);
        mr.label = m.name;
        mr.model_id = std::to_string(m.model_id);
        mr.device_bytes = m.device_bytes;
        mr.host_bytes = m.host_bytes;
        mr.expandable = true;
        mr.expanded = expanded.contains(mr.key);
        rows.push_back(mr);
        if (mr.expanded) category_rows(mr.key, 3, m.categories);
      }
      category_rows(cr.key, 2, c.categories);
    }
  }
  return rows;
}

int SelectedRow(const UiState& ui, const std::vector<TreeRow>& rows) {
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].key == ui.selected) return static_cast<int>(i);
  }
  return 0;
}

namespace {

// Up, Down, Home, End: the selected row of the memory tree.
bool MoveSelection(UiState& ui, int key, const TopView* view) {
  const AppView* app = CurrentApp(ui, view);
  if (app == nullptr) return false;
  const std::vector<TreeRow> rows = FlattenTree(*app, ui.expanded);
  if (rows.empty()) return false;
  int i = SelectedRow(ui, rows);
  const int last = static_cast<int>(rows.size()) - 1;
  if (key == kKeyUp) i = std::max(0, i - 1);
  if (key == kKeyDown) i = std::min(last, i + 1);
  if (key == kKeyHome) i = 0;
  if (key == kKeyEnd) i = last;
  ui.selected = rows[static_cast<size_t>(i)].key;
  return true;
}

// Enter: expands or collapses the selected row.
bool ToggleSelected(UiState& ui, const TopView* view) {
  const AppView* app = CurrentApp(ui, view);
  if (app == nullptr) return false;
  const std::vector<TreeRow> rows = FlattenTree(*app, ui.expanded);
  if (rows.empty()) return false;
  const TreeRow& r = rows[static_cast<size_t>(SelectedRow(ui, rows))];
  ui.selected = r.key;
  if (!r.expandable) return false;
  if (r.expanded) {
    ui.expanded.erase(r.key);
  } else {
    ui.expanded.insert(r.key);
  }
  return true;
}

// x: collapses everything, or expands everything when nothing is.
void ToggleAll(UiState& ui, const TopView* view) {
  const AppView* app = CurrentApp(ui, view);
  if (!ui.expanded.empty()) {
    ui.expanded.clear();
  } else if (app != nullptr) {
    ui.expanded = AllKeys(*app);
  }
}

}  // namespace

bool HandleKey(UiState& ui, int key, const TopView* view) {
  const int tabs = view != nullptr ? static_cast<int>(view->apps.size()) : 0;
  switch (key) {
    case 'q':
    case 'Q':
    case kKeyF10:
      ui.quit = true;
      return true;
    case 'a':
    case kKeyLeft:
      if (tabs > 0) SelectTab(ui, *view, (TabIndex(ui, *view) + tabs - 1) % tabs);
      return true;
    case 'd':
    case kKeyRight:
      if (tabs > 0) SelectTab(ui, *view, (TabIndex(ui, *view) + 1) % tabs);
      return true;
    case 'f':
    case 'F':
      ui.flops = !ui.flops;
      return true;
    case kKeyUp:
    case kKeyDown:
    case kKeyHome:
    case kKeyEnd:
      return MoveSelection(ui, key, view);
    case kKeyEnter:
    case '\n':
    case '\r':
      return ToggleSelected(ui, view);
    case 'x':
    case 'X':
      ToggleAll(ui, view);
      return true;
    case kKeyPageUp:
      ui.grid_scroll = std::max(0, ui.grid_scroll - 4);
      return true;
    case kKeyPageDown:
      ui.grid_scroll += 4;  // the painter clamps it to the devices there are
      return true;
    case 's':
    case kKeyF6:
      ui.sort = static_cast<SortKey>((static_cast<int>(ui.sort) + 1) % kSortKeyCount);
      return true;
    case 'r':
      ui.descending = !ui.descending;
      return true;
    case kKeyResize:
    case kKeyRedraw:
      return true;
    default:
      if (key >= '1' && key <= '9' && view != nullptr) {
        SelectTab(ui, *view, key - '1');
        return true;
      }
      return false;
  }
}

bool WantsDetail(const UiState& ui, const TopView& view) {
  if (TabIndex(ui, view) != 0) return false;
  return std::any_of(ui.expanded.begin(), ui.expanded.end(),
                     [](const std::string& k) { return k.find("/c") != std::string::npos; });
}

std::vector<const ProcessRow*> SortedProcesses(const TopView& view, SortKey key, bool descending) {
  std::vector<const ProcessRow*> rows;
  for (const ProcessRow& p : view.processes) rows.push_back(&p);
  auto cmp = [key](const ProcessRow& a, const ProcessRow& b) -> int {
    switch (key) {
      case SortKey::kPid:
        return Compare<int>(a.pid, b.pid);
      case SortKey::kPod:
        return Compare(PodName(a), PodName(b));
      case SortKey::kDevices:
        return Compare<size_t>(a.devices.size(), b.devices.size());
      case SortKey::kDeviceMemory:
        return Compare(a.device_bytes, b.device_bytes);
      case SortKey::kHostMemory:
        return Compare(a.host_bytes, b.host_bytes);
      case SortKey::kCpu:
        return Compare(a.cpu, b.cpu);
      case SortKey::kUtilization:
        return Compare(a.utilization, b.utilization);
    }
    return 0;
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const ProcessRow* a, const ProcessRow* b) {
    const int c = cmp(*a, *b);
    if (c == -2 || c == 2) return c < 0;  // absent values last in both directions
    if (c != 0) return descending ? c > 0 : c < 0;
    return a->pid < b->pid;
  });
  return rows;
}

std::string_view SortKeyName(SortKey key) {
  switch (key) {
    case SortKey::kPid:
      return "PID";
    case SortKey::kPod:
      return "POD";
    case SortKey::kDevices:
      return "DEVICES";
    case SortKey::kDeviceMemory:
      return "DEV MEM";
    case SortKey::kHostMemory:
      return "HOST MEM";
    case SortKey::kCpu:
      return "CPU%";
    case SortKey::kUtilization:
      return "UTIL%";
  }
  return "";
}

}  // namespace neuron::top
