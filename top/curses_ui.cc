#include "top/curses_ui.h"

#include <curses.h>
#include <poll.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "core/base/component_log.h"
#include "top/screen.h"
#include "top/ui_state.h"

namespace neuron::top {
namespace {

spdlog::logger& UiLog() {
  static std::shared_ptr<spdlog::logger> log = ComponentLogger("top.ui");
  return *log;
}

constexpr int kStyles = 15;
static_assert(static_cast<int>(Style::kChartMem) + 1 == kStyles, "one attribute per Style");

// Colour pair per Style (docs/tools-ux.md#top-colours); pair 0 is the terminal's default.
void InitColors(bool color, std::array<attr_t, kStyles>* attrs) {
  attrs->fill(A_NORMAL);
  auto at = [&](Style s) -> attr_t& { return (*attrs)[static_cast<size_t>(s)]; };
  at(Style::kTitle) = A_REVERSE;
  at(Style::kHeader) = A_REVERSE;
  at(Style::kTabBar) = A_REVERSE;
  at(Style::kTabLabel) = A_REVERSE | A_BOLD;
  at(Style::kTabActive) = A_BOLD;
  at(Style::kSelected) = A_REVERSE;
  at(Style::kWarning) = A_BOLD;
  at(Style::kBarEmpty) = A_DIM;
  at(Style::kModel) = A_DIM;
  if (!color || !has_colors()) return;
  // https://no-color.org: present and non-empty turns colour off; attributes stay
  // (docs/tools-ux.md#top-colours).
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color != nullptr && no_color[0] != '\0') return;
  start_color();
  use_default_colors();
  const short grey = COLORS >= 16 ? 8 : COLOR_BLACK;
  struct Pair {
    Style style;
    short fg;
    short bg;
    attr_t extra;
  };
  const Pair pairs[] = {
      {Style::kTitle, COLOR_BLACK, COLOR_CYAN, 0},
      {Style::kBarFill, COLOR_GREEN, -1, 0},
      {Style::kBarEmpty, grey, -1, COLORS >= 16 ? 0 : A_BOLD},
      {Style::kValue, COLOR_GREEN, -1, 0},
      {Style::kSystemBar, COLOR_RED, -1, 0},
      {Style::kTabBar, COLOR_WHITE, COLOR_BLUE, 0},
      {Style::kTabLabel, COLOR_YELLOW, COLOR_BLUE, A_BOLD},
      {Style::kTabActive, COLOR_GREEN, COLOR_BLUE, A_BOLD},
      {Style::kSelected, COLOR_WHITE, COLOR_RED, 0},
      {Style::kModel, grey, -1, COLORS >= 16 ? 0 : A_BOLD},
      {Style::kWarning, COLOR_RED, -1, A_BOLD},
      {Style::kChartUtil, COLOR_GREEN, -1, 0},
      {Style::kChartMem, COLOR_CYAN, -1, 0},
  };
  short n = 1;
  for (const Pair& p : pairs) {
    init_pair(n, p.fg, p.bg);
    at(p.style) = COLOR_PAIR(n) | p.extra;
    ++n;
  }
}

int MapKey(wint_t ch, int kind) {
  if (kind == KEY_CODE_YES) {
    switch (ch) {
      case KEY_UP:
        return kKeyUp;
      case KEY_DOWN:
        return kKeyDown;
      case KEY_LEFT:
        return kKeyLeft;
      case KEY_RIGHT:
        return kKeyRight;
      case KEY_PPAGE:
        return kKeyPageUp;
      case KEY_NPAGE:
        return kKeyPageDown;
      case KEY_HOME:
        return kKeyHome;
      case KEY_END:
        return kKeyEnd;
      case KEY_ENTER:
        return kKeyEnter;
      case KEY_F(6):
        return kKeyF6;
      case KEY_F(10):
        return kKeyF10;
      case KEY_RESIZE:
        return kKeyResize;
      default:
        return -1;
    }
  }
  if (ch == 12) return kKeyRedraw;  // Ctrl-L
  return static_cast<int>(ch);
}

// Copies the canvas to stdscr in runs of one style, then shows it in one doupdate().
void Blit(const Canvas& canvas, const std::array<attr_t, kStyles>& attrs) {
  std::wstring run;
  for (int y = 0; y < canvas.height(); ++y) {
    int x = 0;
    while (x < canvas.width()) {
      const Style style = canvas.at(y, x).style;
      const int start = x;
      run.clear();
      while (x < canvas.width() && canvas.at(y, x).style == style) {
        run.push_back(static_cast<wchar_t>(canvas.at(y, x).ch));
        ++x;
      }
      attrset(attrs[static_cast<size_t>(style)]);
      // Writing the bottom-right cell returns ERR (the cursor cannot move on); the cell is drawn.
      mvaddnwstr(y, start, run.c_str(), static_cast<int>(run.size()));
    }
  }
  attrset(A_NORMAL);
  wnoutrefresh(stdscr);
  doupdate();
}

int64_t RealtimeNanos() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

int RunTui(ViewFeed& feed, const TuiOptions& options) {
  if (initscr() == nullptr) {
    UiLog().error("initscr failed");
    return 1;
  }
  cbreak();
  noecho();
  nonl();
  keypad(stdscr, TRUE);
  nodelay(stdscr, TRUE);
  curs_set(0);
  std::array<attr_t, kStyles> attrs{};
  InitColors(options.color, &attrs);

  UiState ui;
  std::shared_ptr<const TopView> view = feed.Latest();
  bool dirty = true;
  bool first_frame = true;
  while (!ui.quit) {
    if (dirty) {
      const Layout layout = ComputeLayout(RequestFor(view.get(), ui, COLS, LINES));
      Blit(Paint(view.get(), ui, layout, options.version), attrs);
      if (first_frame) {
        // bench/top_bench reads this line to measure start-up to first frame.
        UiLog().info("first frame at realtime_ns={}", RealtimeNanos());
        first_frame = false;
      }
      dirty = false;
    }
    pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {feed.notify_fd(), POLLIN, 0}};
    const int n = ::poll(fds, 2, -1);
    if (n < 0 && errno != EINTR) {
      UiLog().error("poll: {}", std::strerror(errno));
      break;
    }
    if (n > 0 && (fds[1].revents & POLLIN) != 0) {
      uint64_t count = 0;
      while (::read(feed.notify_fd(), &count, sizeof(count)) > 0) {
      }
      view = feed.Latest();
      dirty = true;
    }
    if (n > 0 && (fds[0].revents & (POLLHUP | POLLERR)) != 0) break;  // terminal gone
    // Keys, and KEY_RESIZE after SIGWINCH interrupted poll().
    wint_t ch = 0;
    int kind = 0;
    while ((kind = get_wch(&ch)) != ERR) {
      const int key = MapKey(ch, kind);
      if (key == kKeyRedraw) clearok(curscr, TRUE);
      if (key >= 0 && HandleKey(ui, key, view.get())) dirty = true;
      if (ui.quit) break;
    }
    if (view != nullptr) feed.SetDetailWanted(WantsDetail(ui, *view));
  }
  endwin();
  return 0;
}

}  // namespace neuron::top
