#include "top/canvas.h"

#include <algorithm>

namespace neuron::top {

std::u32string DecodeUtf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    int len = 0;
    char32_t c = 0;
    if (b < 0x80) {
      len = 1;
      c = b;
    } else if ((b & 0xe0) == 0xc0) {
      len = 2;
      c = b & 0x1f;
    } else if ((b & 0xf0) == 0xe0) {
      len = 3;
      c = b & 0x0f;
    } else if ((b & 0xf8) == 0xf0) {
      len = 4;
      c = b & 0x07;
    }
    bool ok = len > 0 && i + static_cast<size_t>(len) <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      const auto cb = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      if ((cb & 0xc0) != 0x80) ok = false;
      c = (c << 6) | (cb & 0x3f);
    }
    if (!ok) {
      out.push_back(U'\uFFFD');
      ++i;
      continue;
    }
    // Control characters would move the terminal's cursor: show them as '?'.
    out.push_back(c < 0x20 || c == 0x7f ? U'?' : c);
    i += static_cast<size_t>(len);
  }
  return out;
}

void AppendUtf8(char32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3f)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3f)));
  }
}

Canvas::Canvas(int width, int height)
    : width_(std::max(0, width)),
      height_(std::max(0, height)),
      cells_(static_cast<size_t>(width_) * static_cast<size_t>(height_)) {}

int Canvas::Put(int y, int x, std::string_view utf8, Style style, const Rect& clip) {
  const std::u32string text = DecodeUtf8(utf8);
  const int y0 = std::max(0, clip.y);
  const int y1 = std::min(height_, clip.y + clip.h);
  const int x0 = std::max(0, clip.x);
  const int x1 = std::min(width_, clip.x + clip.w);
  int col = x;
  for (const char32_t c : text) {
    if (y >= y0 && y < y1 && col >= x0 && col < x1) {
      cells_[static_cast<size_t>(y * width_ + col)] = Cell{c, style};
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
      cells_[static_cast<size_t>(y * width_ + x)] = Cell{ch, style};
    }
  }
}

void Canvas::Restyle(const Rect& r, Style style) {
  for (int y = std::max(0, r.y); y < std::min(height_, r.y + r.h); ++y) {
    for (int x = std::max(0, r.x); x < std::min(width_, r.x + r.w); ++x) {
      cells_[static_cast<size_t>(y * width_ + x)].style = style;
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
