#pragma once
// A character canvas: what one neuron-top frame shows, cell by cell, with a style per cell.
// The painter (screen.h) draws on it without ncurses, so frames can be tested as text; the
// ncurses renderer only copies cells to the terminal. Not thread-safe; one owner per frame.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "top/format.h"  // DecodeUtf8, AppendUtf8
#include "top/layout.h"

namespace neuron::top {

enum class Style : uint8_t {
  kNormal,
  kTitle,      // title bar and section headers: black on cyan
  kBarFill,    // filled ticks: green
  kBarEmpty,   // empty ticks: dark grey
  kValue,      // figures: green
  kSystemBar,  // system CPU ticks: red
  kTabBar,     // tab bar background: blue
  kTabLabel,   // "Neuron Apps": yellow on blue
  kTabActive,  // current tab: green on blue
  kSelected,   // selected tree row: red background
  kModel,      // model rows: grey
  kWarning,    // a device not READY, errors: red
  kHeader,     // table column headers: reverse
  kChartUtil,  // chart blocks: green
  kChartMem,   // chart blocks: blue
};

struct Cell {
  char32_t ch = U' ';
  Style style = Style::kNormal;
  bool operator==(const Cell&) const = default;
};

class Canvas {
 public:
  Canvas(int width, int height);

  int width() const { return width_; }
  int height() const { return height_; }
  const Cell& at(int y, int x) const { return cells_[Index(y, x)]; }

  // Writes UTF-8 text from (y, x), one column per code point, clipped to the canvas and to
  // `clip`. Returns the column after the last one written (or that would have been).
  int Put(int y, int x, std::string_view utf8, Style style, const Rect& clip);
  int Put(int y, int x, std::string_view utf8, Style style = Style::kNormal);
  // Fills a rectangle (clipped to the canvas).
  void Fill(const Rect& r, Style style, char32_t ch = U' ');
  // Changes the style of cells without touching their characters.
  void Restyle(const Rect& r, Style style);

  // Row y as UTF-8, trailing spaces removed.
  std::string Line(int y) const;
  // All rows joined by '\n'.
  std::string Text() const;

 private:
  // The cell of (y, x) in row-major order; callers keep both within the canvas.
  size_t Index(int y, int x) const {
    return (static_cast<size_t>(y) * static_cast<size_t>(width_)) + static_cast<size_t>(x);
  }

  int width_;
  int height_;
  std::vector<Cell> cells_;
};

// A section's title: the first row of `r`, filled in the title style.
inline void SectionTitle(Canvas& c, const Rect& r, std::string_view text) {
  c.Fill(Rect{r.y, r.x, 1, r.w}, Style::kTitle);
  c.Put(r.y, r.x, text, Style::kTitle, r);
}

}  // namespace neuron::top
