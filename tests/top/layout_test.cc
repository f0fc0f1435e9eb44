// neuron-top's layout over every terminal size from 80x24 to 300x100 (docs/tools-ux.md#requirements
// Q7), on view models collected from simulated trn1.32xlarge and trn2.48xlarge nodes with a runtime
// process on every device: sections never overlap, never leave the screen, and each section's
// painter draws only inside its own rectangle.

#include "top/layout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/driver/datastore_layout.h"
#include "tests/support/fake_datastores.h"
#include "tests/support/temp_dir.h"
#include "tests/top/top_test_util.h"
#include "top/screen.h"
#include "top/view_feed.h"

namespace neuron::top {
namespace {

using namespace ::neuron::top::testing;
using ::testing::HasSubstr;

bool Overlap(const Rect& a, const Rect& b) {
  return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

bool Inside(const Rect& r, int w, int h) {
  return r.x >= 0 && r.y >= 0 && r.x + r.w <= w && r.y + r.h <= h;
}

// A view model from a real ViewFeed over a simulated node, with a runtime (fake PID in a fake
// ROOT/proc) holding a model on every core of every device.
struct Model {
  std::unique_ptr<::neuron::testing::TempDir> dir;
  std::unique_ptr<sim::SimTree> tree;
  std::shared_ptr<const TopView> view;
};

Model Collect(std::string_view instance, int lnc) {
  Model m;
  m.dir = std::make_unique<::neuron::testing::TempDir>("layout");
  const fs::path root = m.dir->path();
  m.tree = MakeTree(root, instance, lnc);
  AddFakeProcess(root, {4242, {"python3", "train.py"}, {}});
  WriteProcStat(root, 100, 100, 800, 8);
  const InstanceSpec* spec = *FindInstance(instance);
  const int cores = LogicalCoresPerDevice(*spec, *ResolveLnc(*spec, lnc));
  auto datastores = ::neuron::testing::FakeDatastores::Make();
  for (int d = 0; d < spec->devices; ++d) {
    sim::DatastoreWriter& w = datastores->Add(d, 4242);
    RuntimeRecords& records = datastores->SetRecords(d, 4242);
    records.process.long_tag = "train";
    for (int k = 0; k < cores; ++k) {
      RuntimeModel model;
      model.model_id = static_cast<uint32_t>(k);
      model.name = "a_model_with_a_rather_long_name_to_truncate_in_narrow_terminals";
      model.nc_index = static_cast<uint8_t>(k);
      records.models.push_back(model);
      EXPECT_TRUE(w.SetCoreCounter(k, nds::kTimeInUse, 1000).ok());
    }
  }
  ViewFeedOptions options;
  options.node.root = root;
  options.node.lnc = lnc;
  // No agent there: the view feed's own health read, and its status line.
  options.agent = "unix:" + (root / "no-agent.sock").string();
  ViewFeed feed(options, nullptr, datastores->Reader(), datastores->Records());
  EXPECT_TRUE(feed.Init().ok());
  m.view = feed.Step();
  return m;
}

void CheckLayouts(const TopView& view, const UiState& ui) {
  const int devices = static_cast<int>(view.apps[0].grid.size());
  // The request depends on the terminal only through its size.
  LayoutRequest req = RequestFor(&view, ui, 80, 24);
  for (int w = 80; w <= 300; ++w) {
    for (int h = 24; h <= 100; ++h) {
      req.width = w;
      req.height = h;
      const Layout l = ComputeLayout(req);
      SCOPED_TRACE(::testing::Message() << w << "x" << h);
      ASSERT_FALSE(l.too_small);
      const std::vector<Rect> rects = VisibleRects(l);
      for (size_t i = 0; i < rects.size(); ++i) {
        ASSERT_TRUE(Inside(rects[i], w, h));
        for (size_t j = i + 1; j < rects.size(); ++j) ASSERT_FALSE(Overlap(rects[i], rects[j]));
      }
      ASSERT_EQ(l.title, (Rect{0, 0, 1, w}));
      ASSERT_EQ(l.help, (Rect{h - 1, 0, 1, w}));
      ASSERT_EQ(l.tabs, (Rect{h - 2, 0, 1, w}));
      const GridGeometry& g = l.grid_geometry;
      ASSERT_FALSE(l.grid.empty());
      ASSERT_GE(g.visible_devices, 1);
      ASSERT_LE(g.label_width + g.cells_per_line * g.cell_width, l.grid.w);
      ASSERT_GE(g.cell_width, kMinCellWidth);
      ASSERT_EQ(g.cells_per_line * g.lines_per_device >= view.cores_per_device, true);
      // Every device is on screen whenever the grid can hold them all.
      if (2 + devices * g.lines_per_device <= h - 3 - l.status.h) {
        ASSERT_EQ(g.visible_devices, devices);
      }
      ASSERT_LE(2 + g.visible_devices * g.lines_per_device, l.grid.h);
      // Health comes right under the grid whenever a line is left there.
      ASSERT_LE(l.health.h, kMaxHealthLines);
      if (req.health_rows > 0 && 2 + devices * g.lines_per_device < h - 3 - l.status.h) {
        ASSERT_EQ(l.health.y, l.grid.y + l.grid.h);
        ASSERT_GE(l.health.h, 1);
      }
      // Status lines sit under the title, one per problem up to the limit.
      ASSERT_EQ(l.status.empty(), req.status_lines == 0);
      if (!l.status.empty()) {
        ASSERT_EQ(l.status, (Rect{1, 0, std::min(req.status_lines, kMaxStatusLines), w}));
      }
    }
  }
}

// Paints each section alone and checks nothing lands outside its rectangle.
void CheckPainters(const TopView& view, const UiState& ui) {
  const AppView& app = view.apps[static_cast<size_t>(TabIndex(ui, view))];
  for (int w = 80; w <= 300; w += 17) {
    for (int h = 24; h <= 100; h += 9) {
      SCOPED_TRACE(::testing::Message() << w << "x" << h);
      const Layout l = ComputeLayout(RequestFor(&view, ui, w, h));
      auto check = [&](const Rect& r, const std::function<void(Canvas&)>& paint) {
        if (r.empty()) return;
        Canvas c(w, h);
        paint(c);
        for (int y = 0; y < h; ++y) {
          for (int x = 0; x < w; ++x) {
            const bool inside = y >= r.y && y < r.y + r.h && x >= r.x && x < r.x + r.w;
            if (!inside) {
              ASSERT_EQ(c.at(y, x), Cell{}) << "at " << y << "," << x;
            }
          }
        }
      };
      check(l.status, [&](Canvas& c) { PaintStatus(c, l.status, view); });
      check(l.grid, [&](Canvas& c) { PaintGrid(c, l.grid, view, app, ui, l.grid_geometry); });
      check(l.health, [&](Canvas& c) { PaintHealth(c, l.health, view); });
      check(l.vcpu, [&](Canvas& c) { PaintVcpu(c, l.vcpu, view, app); });
      check(l.memory, [&](Canvas& c) { PaintMemorySummary(c, l.memory, app); });
      check(l.tree, [&](Canvas& c) { PaintTree(c, l.tree, app, ui); });
      check(l.chart, [&](Canvas& c) { PaintChart(c, l.chart, view); });
      check(l.processes, [&](Canvas& c) { PaintProcesses(c, l.processes, view, ui); });
      check(l.tabs, [&](Canvas& c) { PaintTabs(c, l.tabs, view, ui); });
      const Canvas full = Paint(&view, ui, l, "0.1.0");
      const std::string text = full.Text();
      ASSERT_THAT(text, HasSubstr("neuron-top 0.1.0 running on"));
      ASSERT_THAT(text, HasSubstr("ND0 "));
      ASSERT_THAT(text, HasSubstr("Neuron Apps"));
    }
  }
}

class LayoutTest : public ::testing::TestWithParam<std::pair<std::string, int>> {};

TEST_P(LayoutTest, EverySizeFromEightyByTwentyFourToThreeHundredByHundred) {
  const Model m = Collect(GetParam().first, GetParam().second);
  ASSERT_NE(m.view, nullptr);
  ASSERT_EQ(m.view->apps[0].grid.size(), 16u);
  ASSERT_TRUE(m.view->health.known);
  UiState collapsed;
  CheckLayouts(*m.view, collapsed);
  UiState expanded;
  HandleKey(expanded, 'x', m.view.get());  // every tree node open: the tree wants ~600 rows
  HandleKey(expanded, 'd', m.view.get());  // and the process tab
  ASSERT_GT(FlattenTree(m.view->apps[1], expanded.expanded).size(), 100u);
  CheckLayouts(*m.view, expanded);
}

TEST_P(LayoutTest, SectionsPaintOnlyInsideTheirRectangles) {
  const Model m = Collect(GetParam().first, GetParam().second);
  UiState ui;
  CheckPainters(*m.view, ui);
  HandleKey(ui, 'x', m.view.get());
  HandleKey(ui, 'f', m.view.get());
  CheckPainters(*m.view, ui);
}

// What could not be read takes lines under the title (up to kMaxStatusLines) and the rest of the
// screen still lays out and paints inside its rectangles.
TEST_P(LayoutTest, StatusLinesWhenSomethingCouldNotBeRead) {
  const Model m = Collect(GetParam().first, GetParam().second);
  TopView view = *m.view;
  view.datastore_source = {true, false, "/x/dev/neuron0: permission denied"};
  view.notes = {"cannot read /x/sys/class/neuron_device/neuron0/core_count: Permission denied",
                "cannot read /x/sys/class/neuron_device/neuron0/connected_devices: Permission "
                "denied",
                "cannot read /x/sys/class/neuron_device/neuron0/reset: Permission denied"};
  // Every device's health unknown: more lines than the section may take.
  for (HealthRow& r : view.health.devices) {
    r.state = HealthState::kUnknown;
    r.reasons = {"device state cannot be read"};
  }
  UiState ui;
  // Live data, the three notes, and that health is this read's (no agent in the test).
  ASSERT_EQ(RequestFor(&view, ui, 80, 24).status_lines, 5);
  CheckLayouts(view, ui);
  CheckPainters(view, ui);
  const Layout l = ComputeLayout(RequestFor(&view, ui, 120, 40));
  const std::string text = Paint(&view, ui, l, "0.1.0").Text();
  EXPECT_THAT(text, HasSubstr("live data unavailable (utilization and processes N/A): /x/dev/"));
  EXPECT_THAT(text, HasSubstr("cannot read /x/sys/class/neuron_device/neuron0/connected_devi"));
  EXPECT_THAT(text, HasSubstr("Health (this read only): devices 16 unknown"));
  EXPECT_THAT(text, HasSubstr("ND0    unknown: device state cannot be read"));
  EXPECT_THAT(text, HasSubstr("... 13 more not healthy (--snapshot lists them all)"));
}

INSTANTIATE_TEST_SUITE_P(Nodes, LayoutTest,
                         ::testing::Values(std::make_pair("trn1.32xlarge", 1),
                                           std::make_pair("trn2.48xlarge", 2),
                                           std::make_pair("trn2.48xlarge", 1)),
                         [](const auto& info) {
                           std::string n =
                               info.param.first + "_lnc" + std::to_string(info.param.second);
                           for (char& c : n) {
                             if (c == '.') c = '_';
                           }
                           return n;
                         });

// Below the minimum only the message shows, and it stays on screen (Q7: never crash).
TEST(LayoutSmallTest, TooSmallShowsAMessage) {
  for (int w = 1; w < 80; w += 3) {
    for (int h = 1; h < 24; h += 2) {
      LayoutRequest req;
      req.width = w;
      req.height = h;
      const Layout l = ComputeLayout(req);
      for (const Rect& r : VisibleRects(l)) ASSERT_TRUE(Inside(r, w, h)) << w << "x" << h;
      if (w < kMinWidth || h < kMinHeight) {
        ASSERT_TRUE(l.too_small);
        const Canvas c = Paint(nullptr, UiState{}, l, "0.1.0");
        if (w >= 30) {
          ASSERT_THAT(c.Text(), HasSubstr("terminal too"));
        }
      }
    }
  }
  LayoutRequest zero;
  zero.width = 0;
  zero.height = 0;
  EXPECT_TRUE(ComputeLayout(zero).too_small);
}

}  // namespace
}  // namespace neuron::top
