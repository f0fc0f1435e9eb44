// neuron-top's and neuron-ls's text formatting (top/format.h): sizes, percents, ranges,
// truncation by columns, and TerminalSafe, through which every string a workload controls reaches
// the operator's terminal; and the canvas, which shows escapes even for a string that skipped it.

#include "top/format.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "top/screen.h"

namespace neuron::top {
namespace {

// docs/tools-ux.md#top-layout size format: base 1024, one decimal, no space.
TEST(FormatTest, SizesPercentsAndTruncation) {
  EXPECT_EQ(FormatSize(0), "0.0B");
  EXPECT_EQ(FormatSize(262144), "256.0KB");
  EXPECT_EQ(FormatSize(463261286), "441.8MB");       // 441.8 x 2^20
  EXPECT_EQ(FormatSize(4 * 463261286ull), "1.7GB");  // base 1000 would say 1.8GB
  EXPECT_EQ(FormatSize(std::nullopt), "N/A");
  EXPECT_EQ(FormatGiB(103079215104), "96 GB");
  EXPECT_EQ(FormatGiB(34359738368), "32 GB");
  EXPECT_EQ(FormatPercent(0.5681), "56.81%");
  EXPECT_EQ(FormatRanges({0, 1, 2, 3}), "0-3");
  EXPECT_EQ(FormatRanges({0, 2, 3, 7}), "0,2-3,7");
  EXPECT_EQ(ShortBdf("0000:cc:00.0"), "cc:00.0");
  EXPECT_EQ(TruncateEllipsis("neuron-bench exec --run-as-cc-neff --warmup none", 40),
            "neuron-bench exec --run-as-cc-neff --...");
  // Cut between characters, counted as columns: never half a UTF-8 sequence.
  EXPECT_EQ(TruncateEllipsis("caf\xc3\xa9 caf\xc3\xa9", 7), "caf\xc3\xa9...");
  EXPECT_EQ(TruncateEllipsis("\xc3\xa9\xc3\xa9\xc3\xa9", 3), "\xc3\xa9\xc3\xa9\xc3\xa9");
}

// What a workload writes into its command line, tag or names must not reach the operator's
// terminal as anything it acts on: ESC[2J would clear the screen, U+009B (C1 CSI, two bytes in
// UTF-8) and the raw byte 0x9b start a sequence on terminals that take C1 controls, and a bidi
// override reorders what is shown.
TEST(FormatTest, TerminalSafeShowsControlsAsEscapesAndReplacesInvalidUtf8) {
  EXPECT_EQ(TerminalSafe("python train.py --lr 3e-4"), "python train.py --lr 3e-4");
  EXPECT_EQ(TerminalSafe("\x1b[2Jowned"), "\\x1b[2Jowned");
  EXPECT_EQ(TerminalSafe("a\xc2\x9b"
                         "31mb"),
            "a\\x9b31mb");  // U+009B, C1 CSI
  EXPECT_EQ(TerminalSafe("a\x9b"
                         "31mb"),
            "a\xef\xbf\xbd"
            "31mb");  // a raw 0x9b: not UTF-8
  EXPECT_EQ(TerminalSafe(std::string("\0\t\n\r\x7f", 5)), "\\x00\\x09\\x0a\\x0d\\x7f");
  EXPECT_EQ(TerminalSafe("\xc2\x80\xc2\x9f\xc2\xa0"), "\\x80\\x9f\xc2\xa0");  // C1 ends at U+009F
  EXPECT_EQ(TerminalSafe("\xe2\x80\xae"
                         "evil"),
            "\\u202eevil");  // RIGHT-TO-LEFT OVERRIDE
  // Overlong forms, surrogates and truncated sequences are invalid, not what they spell.
  EXPECT_EQ(TerminalSafe("\xc0\x9b"), "\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(TerminalSafe("\xed\xa0\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(TerminalSafe("\xe2\x82"), "\xef\xbf\xbd\xef\xbf\xbd");
  // Valid text of any script is kept, and the result is a fixed point.
  const std::string kept = "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x9a\x80";
  EXPECT_EQ(TerminalSafe(kept), kept);
  const std::string hostile = "\x1b]0;title\x07\xc2\x9b\x9b\xff\xe2\x80\xae";
  EXPECT_EQ(TerminalSafe(TerminalSafe(hostile)), TerminalSafe(hostile));
  for (const char c : TerminalSafe(hostile)) {
    const auto b = static_cast<unsigned char>(c);
    EXPECT_TRUE(b >= 0x20 && b != 0x7f) << "control byte " << static_cast<int>(b);
  }
}

// The canvas is the last door to the screen: a string painted without passing TerminalSafe
// still shows its escapes, not their effect.
TEST(CanvasTest, ShowsControlCharactersAsEscapes) {
  Canvas c(40, 1);
  c.Put(0, 0,
        "a\x1b[2J\xc2\x9b"
        "1m");
  EXPECT_EQ(c.Line(0), "a\\x1b[2J\\x9b1m");
}

}  // namespace
}  // namespace neuron::top
