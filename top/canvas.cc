#include "top/canvas.h"

#include <algorithm>

#include "top/format.h"

namespace neuron::top {

Canvas::Canvas(int width, int height)
    : width_(std::max(0, width)),
      height_(std::max(0, height)),
      cells_(static_cast<size_t>(width_) * static_cast<size_t>(height_)) {}

int Canvas::Put(int y, int x, std::string_view utf8, Style style, const Rect& clip) {
  // Whatever reaches the screen, from whichever source, cannot move the cursor or start an escape
  // sequence (top/format.h).
  const std::u32string text = DecodeUtf8(TerminalSafe(utf8));
  const int y0 = std::max(0, clip.y);
  const int y1 = std::min(height_, clip.y + clip.h);
  const int x0 = std::max(0, clip.x);
  const int x1 = std::min(width_, clip.x + clip.w);
  int col = x;
  for (const char32_t c : text) {
    if (y >= y0 && y < y1 && col >= x0 && col < x1) {
      cells_[Index(y, col)] = Cell{c, style};
    }
    ++col;
  }
  return col;
}

int Canvas::Put(int y, int x, std::string_view utf8, Style style) {
  return Put(y, x, utf8, style, Rect{0, 0, height_, width_});
}

void Canvas::Fill(const Rect& r, Style style, char32_t ch) {
  for (int y = std::max(0, r.y); y < std::min(height_, r.y + r.h); ++y) {
    for (int x = std::max(0, r.x); x < std::min(width_, r.x + r.w); ++x) {
      cells_[Index(y, x)] = Cell{ch, style};
    }
  }
}

void Canvas::Restyle(const Rect& r, Style style) {
  for (int y = std::max(0, r.y); y < std::min(height_, r.y + r.h); ++y) {
    for (int x = std::max(0, r.x); x < std::min(width_, r.x + r.w); ++x) {
      cells_[Index(y, x)].style = style;
    }
  }
}

std::string Canvas::Line(int y) const {
  std::string out;
  if (y < 0 || y >= height_) return out;
  int last = width_ - 1;
  while (last >= 0 && at(y, last).ch == U' ') --last;
  for (int x = 0; x <= last; ++x) AppendUtf8(at(y, x).ch, &out);
  return out;
}

std::string Canvas::Text() const {
  std::string out;
  for (int y = 0; y < height_; ++y) {
    if (y > 0) out += '\n';
    out += Line(y);
  }
  return out;
}

}  // namespace neuron::top
