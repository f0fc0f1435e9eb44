#pragma once
// neuron-top's interactive state (tab, FLOPS mode, tree expansion and selection, sorting,
// scrolling) and what each key does to it (docs/tools-ux.md#top-keys, plus nvtop's sort keys).
// Pure: the ncurses layer maps its key codes to Key and calls HandleKey. Owned by the drawing
// thread; not thread-safe.

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "top/view_model.h"

namespace neuron::top {

// Non-character keys; characters are their own codes ('q', 'a', '1', ...).
enum Key : int {
  kKeyUp = 0x110000,
  kKeyDown,
  kKeyLeft,
  kKeyRight,
  kKeyPageUp,
  kKeyPageDown,
  kKeyHome,
  kKeyEnd,
  kKeyEnter,
  kKeyF6,
  kKeyF10,
  kKeyResize,
  kKeyRedraw,  // Ctrl-L
};

enum class SortKey { kPid, kPod, kDevices, kDeviceMemory, kHostMemory, kCpu, kUtilization };
inline constexpr int kSortKeyCount = 7;

struct UiState {
  std::optional<int> tab_pid;  // nullopt: the "all" tab
  bool flops = false;
  bool quit = false;
  int grid_scroll = 0;  // first device row shown when the grid does not fit
  std::set<std::string> expanded;
  std::string selected;  // key of the selected tree row; "" = the first row
  SortKey sort = SortKey::kUtilization;
  bool descending = true;
};

enum class TreeRowKind { kDevice, kCore, kModel, kCategory };

struct TreeRow {
  TreeRowKind kind = TreeRowKind::kDevice;
  int depth = 0;
  std::string key;  // "d3", "d3/c1", "d3/c1/m4711.7"; category rows: parent key + "/k<n>"
  std::string label;
  std::string model_id;  // model rows only
  std::optional<uint64_t> device_bytes;
  std::optional<uint64_t> host_bytes;
  bool expandable = false;
  bool expanded = false;
};

// The index into view.apps of the current tab (0 = "all" when the tab's process went away).
int TabIndex(const UiState& ui, const TopView& view);

// The memory tree of one tab as rows, children shown under expanded nodes only.
std::vector<TreeRow> FlattenTree(const AppView& app, const std::set<std::string>& expanded);

// The selected row's index in `rows` (0 when the selection is gone).
int SelectedRow(const UiState& ui, const std::vector<TreeRow>& rows);

// Applies a key. Returns true when the screen changes. `view` may be null before the first one.
bool HandleKey(UiState& ui, int key, const TopView* view);

// True when the screen shows per-core memory categories of the "all" tab, which only a full
// sweep refreshes (view_feed.h).
bool WantsDetail(const UiState& ui, const TopView& view);

// Processes in table order.
std::vector<const ProcessRow*> SortedProcesses(const TopView& view, SortKey key, bool descending);
std::string_view SortKeyName(SortKey key);

}  // namespace neuron::top
