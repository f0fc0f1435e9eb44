#pragma once
// The ncurses front end of neuron-top: copies painted frames (screen.h) to the terminal and
// feeds keys to HandleKey (ui_state.h). It runs on the calling (drawing) thread and only waits
// in poll() on the terminal and the view feed's notify_fd, so input and drawing never wait on
// file I/O (docs/tools-ux.md Q6). It redraws only when a new view arrives or a key changes
// something (Q5), and relays out on KEY_RESIZE, which ncurses delivers on SIGWINCH (Q7).
//
// Not thread-safe: one instance, on the thread that owns the terminal.

#include <string>

#include "top/view_feed.h"

namespace neuron::top {

struct TuiOptions {
  std::string version;  // for the title bar
  // false: monochrome. Colour is also off when NO_COLOR is set and non-empty or the terminal
  // has none (has_colors()); bold and reverse stay (docs/tools-ux.md#top-colours).
  bool color = true;
};

// Runs until the user quits; restores the terminal before returning. Returns an exit code.
int RunTui(ViewFeed& feed, const TuiOptions& options);

}  // namespace neuron::top
