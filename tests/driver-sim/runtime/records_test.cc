// libnrt-sim's records in the datastore's object area (driver-sim/runtime/records.h): what its
// runtime writes is what its own readers (libnrt.so.1's nds_* functions) return, at the offsets
// driver-sim/README.md ("libnrt-sim") gives; a format they do not know is refused, not misread.
#include "driver-sim/runtime/records.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace neuron::nrt::records {
namespace {

class RecordsTest : public ::testing::Test {
 protected:
  std::span<const uint8_t> Area() const { return area_; }
  uint32_t U32At(size_t off) const {
    uint32_t v = 0;
    std::memcpy(&v, area_.data() + off, 4);
    return v;
  }
  ModelNode Node(uint32_t id, const char* name, uint8_t nc) {
    ModelNode n{};
    n.info.model_id = id;
    std::strncpy(n.info.name, name, sizeof(n.info.name) - 1);
    n.info.nc_index = nc;
    return n;
  }

  std::vector<uint8_t> area_ = std::vector<uint8_t>(kAreaSize, 0);
};

TEST_F(RecordsTest, NeverWrittenReadsAsEmptyRecords) {
  nds_process_info_t info;
  nds_process_info_ext_t ext;
  std::vector<ModelNode> models{Node(1, "stale", 0)};
  EXPECT_EQ(ReadProcessInfo(Area(), &info, &ext), ReadResult::kOk);
  EXPECT_EQ(ReadModels(Area(), &models), ReadResult::kOk);
  EXPECT_TRUE(models.empty());
  EXPECT_EQ(info.tag[0], '\0');
  EXPECT_EQ(ext.tag[0], '\0');
}

TEST_F(RecordsTest, ProcessInfoAndTagAtTheDocumentedOffsets) {
  Writer w(area_);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(area_.data()), 4), "nrts");
  EXPECT_EQ(U32At(4), 1u);
  nds_process_info_t in{};
  in.framework_type = 3;
  std::strcpy(in.tag, "train.py");
  in.runtime_version = {2, 28, 7};
  w.SetProcessInfo(in);
  w.SetProcessInfoExt(std::string(300, 'x'));
  EXPECT_EQ(area_[16], 3);  // framework_type
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(&area_[17])), "train.py");
  EXPECT_EQ(area_[16 + 52], 2);  // runtime major
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(&area_[76])), std::string(255, 'x'));
  EXPECT_EQ(U32At(8) % 2, 0u) << "no write in progress";
  nds_process_info_t info;
  nds_process_info_ext_t ext;
  ASSERT_EQ(ReadProcessInfo(Area(), &info, &ext), ReadResult::kOk);
  EXPECT_EQ(info.framework_type, 3);
  EXPECT_STREQ(info.tag, "train.py");
  EXPECT_EQ(info.runtime_version.minor, 28);
  EXPECT_EQ(info.runtime_version.build, 7u);
  EXPECT_EQ(std::string(ext.tag), std::string(255, 'x'));
  EXPECT_EQ(TagOf(Area()), std::string(255, 'x'));
  w.SetProcessInfoExt("");
  EXPECT_EQ(TagOf(Area()), "train.py") << "the short tag stands in for an empty long one";
}

TEST_F(RecordsTest, ModelsAddAndRemoveUpToTheLimit) {
  Writer w(area_);
  ModelNode first = Node(1001, "llama2-7b-tp8", 3);
  first.memory.model_mem_usage[0][1] = {123456789, 4};
  ASSERT_TRUE(w.AddModel(first));
  EXPECT_EQ(U32At(12), 1u);
  EXPECT_EQ(U32At(332), 1001u);  // the first record
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(&area_[332 + 8])), "llama2-7b-tp8");
  for (uint32_t i = 1; i < kMaxModelNodes; ++i) ASSERT_TRUE(w.AddModel(Node(1001 + i, "m", 0)));
  EXPECT_EQ(kMaxModelNodes, 64);
  EXPECT_FALSE(w.AddModel(Node(5000, "one too many", 0)));
  std::vector<ModelNode> models;
  ASSERT_EQ(ReadModels(Area(), &models), ReadResult::kOk);
  ASSERT_EQ(models.size(), 64u);
  EXPECT_EQ(models[0].info.nc_index, 3);
  EXPECT_EQ(models[0].memory.model_mem_usage[0][1].total_size, 123456789u);
  EXPECT_EQ(models[0].memory.model_mem_usage[0][1].chunk_count, 4u);
  // Removing the first moves the last (1064) into its place.
  ASSERT_TRUE(w.RemoveModel(1001, 0));
  EXPECT_FALSE(w.RemoveModel(1001, 0));
  ASSERT_EQ(ReadModels(Area(), &models), ReadResult::kOk);
  ASSERT_EQ(models.size(), 63u);
  EXPECT_EQ(models[0].info.model_id, 1064u);
}

// A runtime of another format (a version or layout this library does not know) is refused, so
// a reader says "unknown" instead of showing garbage as names.
TEST_F(RecordsTest, AnotherFormatIsRefused) {
  Writer w(area_, /*version=*/2);
  nds_process_info_t info;
  nds_process_info_ext_t ext;
  std::vector<ModelNode> models;
  EXPECT_EQ(ReadProcessInfo(Area(), &info, &ext), ReadResult::kUnknownFormat);
  EXPECT_EQ(ReadModels(Area(), &models), ReadResult::kUnknownFormat);
  EXPECT_EQ(TagOf(Area()), "");
  std::memcpy(area_.data(), "simo", 4);  // the simulator's retired format
  EXPECT_EQ(ReadProcessInfo(Area(), &info, &ext), ReadResult::kUnknownFormat);
}

TEST_F(RecordsTest, AModelCountBeyondTheAreaIsRefused) {
  Writer w(area_);
  const uint32_t bad = 65;
  std::memcpy(area_.data() + 12, &bad, 4);
  std::vector<ModelNode> models;
  EXPECT_EQ(ReadModels(Area(), &models), ReadResult::kUnknownFormat);
  EXPECT_TRUE(models.empty());
}

// A write that never finishes (a runtime that died mid-write) makes a reader give up rather
// than return a half-written record.
TEST_F(RecordsTest, AWriteInProgressIsNeverReturned) {
  Writer w(area_);
  w.SetProcessInfoExt("before");
  const uint32_t odd = U32At(8) + 1;
  std::memcpy(area_.data() + 8, &odd, 4);
  nds_process_info_t info;
  nds_process_info_ext_t ext;
  EXPECT_EQ(ReadProcessInfo(Area(), &info, &ext), ReadResult::kBusy);
}

}  // namespace
}  // namespace neuron::nrt::records
