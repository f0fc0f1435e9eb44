#include "core/events/kmsg.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/base/unique_fd.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// The documented line (docs/driver-interface.md#hardware-errors), with the prefix NPD's pattern
// needs.
constexpr std::string_view kDocumentedHwErr =
    "NEURON_HW_ERR=SRAM_UNCORRECTABLE_ERROR instance-id=i-0123456789abcdef0 "
    "hostname=ip-10-0-0-1 nd-id=0 nc-id=0 serial-num=19fcda00f5ff6eb9 action=TERMINATE_INSTANCE";

TEST(KmsgRecord, ParsesHeaderAndText) {
  absl::StatusOr<KmsgRecord> r = ParseKmsgRecord("6,339,5140900,-;NET: Registered protocol\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->facility, 0);
  EXPECT_EQ(r->level, 6);
  EXPECT_EQ(r->seq, 339u);
  EXPECT_EQ(r->usec, 5140900u);
  EXPECT_EQ(r->flags, "-");
  EXPECT_EQ(r->text, "NET: Registered protocol");
  EXPECT_TRUE(r->dict.empty());
}

TEST(KmsgRecord, FacilityAndExtraHeaderFields) {
  // prio 11 = facility 1 (user), level 3 (err); newer kernels append ",caller=T123".
  absl::StatusOr<KmsgRecord> r = ParseKmsgRecord("11,7,42,c,caller=T123;a;b");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->facility, 1);
  EXPECT_EQ(r->level, 3);
  EXPECT_EQ(r->flags, "c");
  EXPECT_EQ(r->text, "a;b");  // only the first ';' ends the header
}

TEST(KmsgRecord, ContinuationLinesAreDictionaryEntries) {
  absl::StatusOr<KmsgRecord> r = ParseKmsgRecord(
      "3,1001,9000,-;neuron 0000:10:1c.0: failed\n SUBSYSTEM=pci\n DEVICE=+pci:0000:10:1c.0\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->text, "neuron 0000:10:1c.0: failed");
  EXPECT_THAT(r->dict, ElementsAre(Pair("SUBSYSTEM", "pci"), Pair("DEVICE", "+pci:0000:10:1c.0")));
}

TEST(KmsgRecord, RejectsGarbage) {
  for (std::string_view bad :
       {"", "no header at all", "x,1,2,-;text", "6,1;too few fields", "6,-1,2,-;negative seq",
        "6,1,2,-;ok\nnot a continuation", "6,1,2,-;ok\n =novalue", "-8,1,2,-;negative prio",
        "6,99999999999999999999999,2,-;seq overflows"}) {
    absl::StatusOr<KmsgRecord> r = ParseKmsgRecord(bad);
    EXPECT_FALSE(r.ok()) << "accepted: " << bad;
    if (!r.ok()) {
      EXPECT_THAT(std::string{r.status().message()}, HasSubstr("kmsg record"));
    }
  }
}

TEST(KmsgRecord, HugeLineIsParsedWithoutTruncation) {
  const std::string text(200000, 'x');
  absl::StatusOr<KmsgRecord> r = ParseKmsgRecord("6,1,2,-;" + text + "\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->text.size(), text.size());
}

TEST(KmsgRecord, SplitGroupsContinuationLines) {
  EXPECT_THAT(SplitKmsgRecords("6,1,1,-;a\n K=v\n6,2,2,-;b\n6,3,3,-;c\n"),
              ElementsAre("6,1,1,-;a\n K=v\n", "6,2,2,-;b\n", "6,3,3,-;c\n"));
}

TEST(HwError, ParsesDocumentedLineAfterPrefix) {
  const std::string text = "nrt: " + std::string(kDocumentedHwErr);
  std::optional<HwErrorRecord> e = ParseHwError(text);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->type, "SRAM_UNCORRECTABLE_ERROR");
  EXPECT_EQ(e->instance_id, "i-0123456789abcdef0");
  EXPECT_EQ(e->hostname, "ip-10-0-0-1");
  EXPECT_EQ(e->nd_id, 0);
  EXPECT_EQ(e->nc_id, 0);
  EXPECT_EQ(e->serial_number, "19fcda00f5ff6eb9");
  EXPECT_EQ(e->action, "TERMINATE_INSTANCE");
  EXPECT_EQ(e->text, text);
}

TEST(HwError, OtherTypesAndPartialFields) {
  std::optional<HwErrorRecord> e = ParseHwError("x NEURON_HW_ERR=HBM_UNCORRECTABLE_ERROR nd-id=7");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->type, "HBM_UNCORRECTABLE_ERROR");
  EXPECT_EQ(e->nd_id, 7);
  EXPECT_FALSE(e->nc_id.has_value());
  EXPECT_EQ(e->action, "");
}

TEST(HwError, BadIdsAreAbsentNotZero) {
  std::optional<HwErrorRecord> e =
      ParseHwError("p NEURON_HW_ERR=DMA_ERROR nd-id=abc nc-id=-1 nd-id2=3 junk");
  ASSERT_TRUE(e.has_value());
  EXPECT_FALSE(e->nd_id.has_value());
  EXPECT_FALSE(e->nc_id.has_value());
}

TEST(HwError, NoTokenOrEmptyType) {
  EXPECT_FALSE(ParseHwError("neuron: nd0: reset request 1 completed").has_value());
  EXPECT_FALSE(ParseHwError("p NEURON_HW_ERR= nd-id=0").has_value());
  EXPECT_FALSE(ParseHwError("").has_value());
}

// The driver's reset thread's lines (docs/driver-interface.md#reset-and-state): only a device
// reset (request 4294967295) moves the state.
TEST(ResetRecord, DeviceResetStepsAndNothingElse) {
  using R = ResetRecord;
  EXPECT_EQ(ParseResetRecord(
                "neuron:nr_reset_thread_fn: nd3: initiating device reset request 4294967295"),
            (R{3, ResetStep::kInitiated}));
  EXPECT_EQ(ParseResetRecord("neuron:nr_reset_thread_fn: nd12: reset request 4294967295 completed"),
            (R{12, ResetStep::kCompleted}));
  EXPECT_EQ(ParseResetRecord("neuron:nr_reset_thread_fn: nd0: reset request 4294967295 failed"),
            (R{0, ResetStep::kFailed}));
  EXPECT_FALSE(ParseResetRecord("neuron:nr_reset_thread_fn: nd3: initiating TPB reset request 7"));
  EXPECT_FALSE(ParseResetRecord("neuron:nr_reset_thread_fn: nd3: reset request 1 completed"));
  EXPECT_FALSE(ParseResetRecord("neuron:nr_reset_thread_fn: nd3: Coalesced 2 reset requests"));
  EXPECT_FALSE(ParseResetRecord("neuron:nr_reset_thread_fn: ndX: reset request 4294967295 failed"));
  EXPECT_FALSE(ParseResetRecord("nrt: NEURON_HW_ERR=DMA_ERROR nd-id=0"));
}

// A process's first open of a device and its last close (docs/driver-interface.md#open-close-log).
TEST(OpenCloseRecord, AttachAndDetachAndNothingElse) {
  EXPECT_TRUE(IsOpenCloseRecord("neuron:npid_attach: neuron:npid_attach: pid=7, slot=0"));
  EXPECT_TRUE(IsOpenCloseRecord("neuron:npid_detach: neuron:npid_detach: pid=7, slot=3"));
  EXPECT_FALSE(IsOpenCloseRecord("neuron:ncdev_open: nd3: pid 7 failed to open"));
  EXPECT_FALSE(IsOpenCloseRecord("neuron:npid_print_usage: pid 7 open count 1"));
  EXPECT_FALSE(IsOpenCloseRecord("nrt: NEURON_HW_ERR=DMA_ERROR nd-id=0"));
}

using ::neuron::testing::TempDir;

void Append(const std::filesystem::path& p, std::string_view data) {
  std::ofstream out(p, std::ios::app | std::ios::binary);
  out << data;
}

struct Collected {
  std::vector<KmsgRecord> records;
  std::vector<std::string> malformed;
  KmsgReader::RecordFn on_record() {
    return [this](const KmsgRecord& r) { records.push_back(r); };
  }
  KmsgReader::MalformedFn on_malformed() {
    return [this](std::string_view raw, const absl::Status&) { malformed.emplace_back(raw); };
  }
};

TEST(KmsgReader, RegularFileStartsAtEndAndConsumesOnlyCompleteLines) {
  TempDir dir;
  const auto file = dir.path() / "kmsg";
  Append(file, "6,0,1,-;history before we started\n");
  absl::StatusOr<std::unique_ptr<KmsgReader>> reader = KmsgReader::Open(file);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->pollable_fd(), -1);
  Collected c;
  ASSERT_TRUE((*reader)->ReadAvailable(c.on_record(), c.on_malformed()).ok());
  EXPECT_TRUE(c.records.empty());

  Append(file, "3,1,2,-;first\n3,2,3,-;sec");  // the second record is half written
  ASSERT_TRUE((*reader)->ReadAvailable(c.on_record(), c.on_malformed()).ok());
  ASSERT_EQ(c.records.size(), 1u);
  EXPECT_EQ(c.records[0].text, "first");

  Append(file, "ond\ngarbage line\n3,3,4,-;third\n");
  ASSERT_TRUE((*reader)->ReadAvailable(c.on_record(), c.on_malformed()).ok());
  ASSERT_EQ(c.records.size(), 3u);
  EXPECT_EQ(c.records[1].text, "second");
  EXPECT_EQ(c.records[2].text, "third");
  EXPECT_THAT(c.malformed, ElementsAre("garbage line\n"));
}

TEST(KmsgReader, OversizedLineIsSkippedAndReadingContinues) {
  TempDir dir;
  const auto file = dir.path() / "kmsg";
  Append(file, "");
  absl::StatusOr<std::unique_ptr<KmsgReader>> reader = KmsgReader::Open(file);
  ASSERT_TRUE(reader.ok());
  Append(file, "6,1,1,-;" + std::string(size_t{600} * 1024, 'y') + "\n6,2,2,-;after\n");
  Collected c;
  ASSERT_TRUE((*reader)->ReadAvailable(c.on_record(), c.on_malformed()).ok());
  ASSERT_EQ(c.records.size(), 1u);
  EXPECT_EQ(c.records[0].text, "after");
  EXPECT_EQ(c.malformed.size(), 1u);
}

TEST(KmsgReader, FileReplacedByRenameKeepsPosition) {
  TempDir dir;
  const auto file = dir.path() / "kmsg";
  Append(file, "6,1,1,-;old\n");
  absl::StatusOr<std::unique_ptr<KmsgReader>> reader = KmsgReader::Open(file);
  ASSERT_TRUE(reader.ok());
  const auto tmp = dir.path() / "kmsg.tmp";
  Append(tmp, "6,1,1,-;old\n6,2,2,-;new\n");
  std::filesystem::rename(tmp, file);
  Collected c;
  ASSERT_TRUE((*reader)->ReadAvailable(c.on_record(), c.on_malformed()).ok());
  ASSERT_EQ(c.records.size(), 1u);
  EXPECT_EQ(c.records[0].text, "new");
}

TEST(KmsgReader, TruncatedFileIsReadFromStart) {
  TempDir dir;
  const auto file = dir.path() / "kmsg";
  Append(file, "6,1,1,-;a long old record that makes the file big\n");
  absl::StatusOr<std::unique_ptr<KmsgReader>> reader = KmsgReader::Open(file);
  ASSERT_TRUE(reader.ok());
  std::filesystem::resize_file(file, 0);
  Append(file, "6,1,1,-;fresh\n");
  Collected c;
  ASSERT_TRUE((*reader)->ReadAvailable(c.on_record(), c.on_malformed()).ok());
  ASSERT_EQ(c.records.size(), 1u);
  EXPECT_EQ(c.records[0].text, "fresh");
}

// The real /dev/kmsg hands out one record per read(); a SOCK_SEQPACKET pair does the same,
// so the stream path (the one the char device takes) runs here without kernel privileges.
TEST(KmsgReader, StreamDeliversOneRecordPerRead) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  const UniqueFd writer(sv[1]);  // sv[0] is the reader's from here on
  absl::StatusOr<std::unique_ptr<KmsgReader>> reader = KmsgReader::Adopt(sv[0], "socketpair");
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->pollable_fd(), sv[0]);
  EXPECT_FALSE((*reader)->is_regular_file());
  const std::string hw = "3,10,500,-;nrt: " + std::string(kDocumentedHwErr) + "\n";
  for (const std::string& rec :
       {std::string("6,9,400,-;before\n SUBSYSTEM=pci\n"), hw, std::string("junk\n")}) {
    ASSERT_EQ(::write(writer.get(), rec.data(), rec.size()), static_cast<ssize_t>(rec.size()));
  }
  Collected c;
  ASSERT_TRUE((*reader)->ReadAvailable(c.on_record(), c.on_malformed()).ok());
  ASSERT_EQ(c.records.size(), 2u);
  EXPECT_THAT(c.records[0].dict, ElementsAre(Pair("SUBSYSTEM", "pci")));
  std::optional<HwErrorRecord> e = ParseHwError(c.records[1].text);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->serial_number, "19fcda00f5ff6eb9");
  EXPECT_EQ(c.malformed.size(), 1u);
  // Nothing more: a non-blocking read reports no data instead of blocking.
  ASSERT_TRUE((*reader)->ReadAvailable(c.on_record(), c.on_malformed()).ok());
  EXPECT_EQ(c.records.size(), 2u);
}

TEST(KmsgReader, MissingFileIsNotFound) {
  absl::StatusOr<std::unique_ptr<KmsgReader>> reader =
      KmsgReader::Open("/nonexistent-root-for-test/dev/kmsg");
  ASSERT_FALSE(reader.ok());
  EXPECT_TRUE(absl::IsNotFound(reader.status()));
  EXPECT_THAT(std::string{reader.status().message()},
              HasSubstr("/nonexistent-root-for-test/dev/kmsg"));
}

}  // namespace
}  // namespace neuron
