// core/proc/meminfo.h on literal /proc/meminfo text (proc(5) format) and on a file in a fake
// PROC directory.

#include "core/proc/meminfo.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

constexpr char kMeminfo[] =
    "MemTotal:       16318332 kB\n"
    "MemFree:         1210044 kB\n"
    "MemAvailable:   10250100 kB\n"
    "Buffers:          500000 kB\n"
    "SwapTotal:       2097148 kB\n"
    "SwapFree:        2097148 kB\n"
    "HugePages_Total:       0\n";

TEST(MeminfoTest, ParsesTheFieldsInBytes) {
  const MemInfo m = ParseMeminfo(kMeminfo);
  EXPECT_EQ(m.mem_total, 16318332ull * 1024);
  EXPECT_EQ(m.mem_available, 10250100ull * 1024);
  EXPECT_EQ(m.swap_total, 2097148ull * 1024);
  EXPECT_EQ(m.swap_free, 2097148ull * 1024);
  EXPECT_EQ(m.MemUsed(), (16318332ull - 10250100ull) * 1024);
  EXPECT_EQ(m.SwapUsed(), 0u);
}

// Missing and malformed lines leave their field absent; a free part above the total gives no
// used figure rather than a wrapped one.
TEST(MeminfoTest, PartialAndMalformedTextLeavesFieldsAbsent) {
  MemInfo m = ParseMeminfo("MemTotal: 100 kB\nMemAvailable: lots kB\nSwapTotal: 5 MB\n");
  EXPECT_EQ(m.mem_total, 102400u);
  EXPECT_FALSE(m.mem_available);
  EXPECT_FALSE(m.swap_total);
  EXPECT_FALSE(m.MemUsed());
  m = ParseMeminfo("MemTotal: 100 kB\nMemAvailable: 200 kB");  // no final newline
  EXPECT_EQ(m.mem_available, 204800u);
  EXPECT_FALSE(m.MemUsed());
  EXPECT_FALSE(ParseMeminfo("").mem_total);
  EXPECT_FALSE(ParseMeminfo("MemTotal: 99999999999999999999 kB\n").mem_total);
}

TEST(MeminfoTest, ReadsProcMeminfoAndNamesAMissingFile) {
  testing::TempDir dir;
  const ProcReader proc = ProcReader::AtDirectory(dir.path());
  absl::StatusOr<MemInfo> missing = ReadMeminfo(proc);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find((dir.path() / "meminfo").string()), std::string::npos)
      << missing.status();
  std::ofstream(dir.path() / "meminfo") << kMeminfo;
  absl::StatusOr<MemInfo> m = ReadMeminfo(proc);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->mem_total, 16318332ull * 1024);
}

}  // namespace
}  // namespace neuron
