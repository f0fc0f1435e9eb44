// libnrt-sim's C API: life cycle, status codes, instance info, NEFF checks, tensors, tensor sets
// and device memory (docs/runtime.md#public-functions, #status-codes, #neff-header, #load;
// docs/hardware.md#core-parameters, #device-memory).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tests/driver-sim/runtime/runtime_test_util.h"

namespace neuron::nrt::testing {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kMiB = 1ull << 20;

class RuntimeApiTest : public SimNodeTest {};

TEST_F(RuntimeApiTest, CallsBeforeInitAndAfterCloseGetTheirOwnCodes) {
  MakeNode("trn1.2xlarge");
  const std::string neff = Neff(Ops(""));
  nrt_model_t* model = nullptr;
  // docs/runtime.md#status-codes: 13 before nrt_init, 14 after nrt_close.
  EXPECT_EQ(nrt_load(neff.data(), neff.size(), -1, -1, &model), 13);
  nrt_version_t ver{};
  ASSERT_EQ(nrt_get_version(&ver, sizeof(ver)), NRT_SUCCESS);  // exempt from the init rule
  EXPECT_EQ(ver.rt_major, 2u);
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  ASSERT_EQ(nrt_load(neff.data(), neff.size(), -1, -1, &model), NRT_SUCCESS);
  EXPECT_EQ(nrt_execute(model, nullptr, nullptr), NRT_SUCCESS);
  nrt_close();
  EXPECT_EQ(nrt_load(neff.data(), neff.size(), -1, -1, &model), 14);
  nrt_tensor_t* t = nullptr;
  EXPECT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 64, "t", &t), 14);
  EXPECT_STREQ(nrt_get_status_as_str(NRT_TIMEOUT), "NRT_TIMEOUT");
  EXPECT_STREQ(nrt_get_status_as_str(static_cast<NRT_STATUS>(1200)), "NRT_EXEC_HW_ERR_COLLECTIVES");
  EXPECT_STREQ(nrt_get_status_as_str(static_cast<NRT_STATUS>(8)), "NRT_UNKNOWN_STATUS");
}

TEST_F(RuntimeApiTest, InstanceInfoAndCoreCounts) {
  MakeNode("trn1.2xlarge");
  nrt_instance_info_t info{};
  ASSERT_EQ(nrt_get_instance_info(&info, sizeof(info)), NRT_SUCCESS);
  EXPECT_EQ(info.family, 2u);  // NRT_INSTANCE_TRN1
  EXPECT_EQ(info.size, 1u);    // NRT_INSTANCE_SIZE_2XL
  uint32_t n = 0;
  ASSERT_EQ(nrt_get_total_nc_count(&n), NRT_SUCCESS);
  EXPECT_EQ(n, 2u);
  ::setenv("NEURON_RT_VISIBLE_CORES", "1", 1);
  ASSERT_EQ(nrt_get_visible_vnc_count(&n), NRT_SUCCESS);  // before init: what the env asks for
  EXPECT_EQ(n, 1u);
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  ASSERT_EQ(nrt_get_visible_nc_count(&n), NRT_SUCCESS);
  EXPECT_EQ(n, 1u);
  ASSERT_EQ(nrt_get_total_vnc_count(&n), NRT_SUCCESS);  // ignores the environment
  EXPECT_EQ(n, 2u);
}

TEST_F(RuntimeApiTest, Trn2InstanceInfoCountsLogicalCores) {
  MakeNode("trn2.48xlarge");  // LNC 2 by default (docs/architecture.md#lnc)
  nrt_instance_info_t info{};
  ASSERT_EQ(nrt_get_instance_info(&info, sizeof(info)), NRT_SUCCESS);
  EXPECT_EQ(info.family, 5u);  // NRT_INSTANCE_TRN2
  EXPECT_EQ(info.size, 7u);    // NRT_INSTANCE_SIZE_48XL
  uint32_t n = 0;
  ASSERT_EQ(nrt_get_total_vnc_count(&n), NRT_SUCCESS);
  EXPECT_EQ(n, 64u);  // docs/hardware.md#instance-catalog: 64 logical cores at LNC=2
}

TEST_F(RuntimeApiTest, LoadChecksTheNeffHeader) {
  MakeNode("trn1.2xlarge");
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  nrt_model_t* m = nullptr;
  nrtsim_neff_options_t v3{};
  v3.neff_version_major = 3;
  std::string neff = Neff(Ops(""), v3);
  EXPECT_EQ(nrt_load(neff.data(), neff.size(), -1, -1, &m), NRT_UNSUPPORTED_NEFF_VERSION);
  nrtsim_neff_options_t three_cores{};
  three_cores.num_tpb = 3;
  neff = Neff(Ops(""), three_cores);
  EXPECT_EQ(nrt_load(neff.data(), neff.size(), -1, -1, &m), NRT_LOAD_NOT_ENOUGH_NC);
  nrtsim_neff_options_t lnc2{};
  lnc2.lnc_size = 2;  // trn1 runs LNC 1
  neff = Neff(Ops(""), lnc2);
  EXPECT_EQ(nrt_load(neff.data(), neff.size(), -1, -1, &m), NRT_INVALID);
  neff = Neff(Ops(""));
  EXPECT_EQ(nrt_load(neff.data(), 500, -1, -1, &m), NRT_INVALID);              // truncated header
  EXPECT_EQ(nrt_load(neff.data(), neff.size() - 1, -1, -1, &m), NRT_INVALID);  // data_size
  const std::string garbage(2048, 'x');
  EXPECT_EQ(nrt_load(garbage.data(), garbage.size(), -1, -1, &m), NRT_INVALID);
  // The 1.x and 2.x versions load.
  nrtsim_neff_options_t v1{};
  v1.neff_version_major = 1;
  neff = Neff(Ops(""), v1);
  EXPECT_EQ(nrt_load(neff.data(), neff.size(), -1, -1, &m), NRT_SUCCESS);
  // The unsupported version counted on the core it was aimed at
  // (index 20, docs/driver-interface.md#core-counter-indices).
  neff = Neff(Ops(""), v3);
  EXPECT_EQ(nrt_load(neff.data(), neff.size(), 1, -1, &m), NRT_UNSUPPORTED_NEFF_VERSION);
  EXPECT_EQ(DsCounter(0, 1, nds::kErrUnsupportedNeffVersion), 1u);
}

TEST_F(RuntimeApiTest, BadOpListIsRejectedNamingThePlace) {
  void* buf = nullptr;
  size_t size = 0;
  EXPECT_EQ(nrtsim_build_neff(R"({"version": 1, "ops": [{"op": "matmul", "m": 4}]})", nullptr, &buf,
                              &size),
            NRT_INVALID);
  EXPECT_THAT(nrtsim_last_error(), HasSubstr("ops[0].k"));
  EXPECT_EQ(nrtsim_build_neff(R"({"version": 1, "ops": [{"op": "warp"}]})", nullptr, &buf, &size),
            NRT_INVALID);
  EXPECT_THAT(nrtsim_last_error(), HasSubstr("unknown op \"warp\""));
  EXPECT_EQ(nrtsim_build_neff("{", nullptr, &buf, &size), NRT_INVALID);
  EXPECT_THAT(nrtsim_last_error(), HasSubstr("not valid JSON"));
  EXPECT_EQ(
      nrtsim_build_neff(
          R"({"version": 1, "ops": [{"op": "allreduce", "bytes": 8, "groups": [[0,1],[1]]}]})",
          nullptr, &buf, &size),
      NRT_INVALID);
  EXPECT_THAT(nrtsim_last_error(), HasSubstr("rank 1 is in more than one group"));
}

TEST_F(RuntimeApiTest, CollectiveTensorsMustBeTheOpListsOwnAndSummable) {
  void* buf = nullptr;
  size_t size = 0;
  auto build = [&](const std::string& in_dtype, const std::string& op) {
    const std::string ops = R"({"version": 1, "inputs": [{"name": "x", "dtype": ")" + in_dtype +
                            R"(", "shape": [4]}], "outputs": [{"name": "y", "dtype": "float32",
                            "shape": [4]}], "ops": [)" +
                            op + "]}";
    const NRT_STATUS s = nrtsim_build_neff(ops.c_str(), nullptr, &buf, &size);
    if (s == NRT_SUCCESS) nrtsim_free_neff(buf);
    return s;
  };
  EXPECT_EQ(build("float32", R"({"op": "allreduce", "bytes": 16, "input": "x", "output": "y"})"),
            NRT_SUCCESS);
  EXPECT_EQ(build("float32", R"({"op": "allreduce", "bytes": 16, "input": "z", "output": "y"})"),
            NRT_INVALID);
  EXPECT_THAT(nrtsim_last_error(), HasSubstr("input \"z\" is not in inputs"));
  EXPECT_EQ(build("float32", R"({"op": "allreduce", "bytes": 16, "input": "x"})"), NRT_INVALID);
  EXPECT_THAT(nrtsim_last_error(), HasSubstr("give both input and output"));
  EXPECT_EQ(build("fp8_e4", R"({"op": "allreduce", "bytes": 16, "input": "x", "output": "y"})"),
            NRT_INVALID);
  EXPECT_THAT(nrtsim_last_error(), HasSubstr("summable type"));
  EXPECT_EQ(
      build("float32", R"({"op": "reducescatter", "bytes": 16, "input": "x", "output": "y"})"),
      NRT_INVALID);
  EXPECT_THAT(nrtsim_last_error(), HasSubstr("allreduce and allgather only"));
}

TEST_F(RuntimeApiTest, TensorsHoldBytesAndObeyPlacementRules) {
  MakeNode("trn1.2xlarge");
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  nrt_tensor_t *a = nullptr, *b = nullptr, *c = nullptr, *host = nullptr;
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 4096, "a", &a), NRT_SUCCESS);
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 4096, "b", &b), NRT_SUCCESS);
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 1, 4096, "c", &c), NRT_SUCCESS);
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_VIRTUAL, -1, 4096, "h", &host), NRT_SUCCESS);
  EXPECT_EQ(nrt_tensor_get_size(a), 4096u);
  const char text[] = "neuron";
  ASSERT_EQ(nrt_tensor_write(a, text, 100, sizeof(text)), NRT_SUCCESS);
  char out[sizeof(text)] = {};
  ASSERT_EQ(nrt_tensor_read(a, out, 100, sizeof(out)), NRT_SUCCESS);
  EXPECT_STREQ(out, text);
  EXPECT_EQ(nrt_tensor_read(a, out, 4090, sizeof(out)), NRT_INVALID);  // past the end
  // Device to device on one core works; across cores it is NRT_INVALID
  // (docs/runtime.md#public-functions).
  EXPECT_EQ(nrt_tensor_copy(a, 100, b, 0, sizeof(text)), NRT_SUCCESS);
  ASSERT_EQ(nrt_tensor_read(b, out, 0, sizeof(out)), NRT_SUCCESS);
  EXPECT_STREQ(out, text);
  EXPECT_EQ(nrt_tensor_copy(a, 0, c, 0, 16), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_copy(a, 100, host, 0, sizeof(text)), NRT_SUCCESS);
  EXPECT_STREQ(static_cast<const char*>(nrt_tensor_get_va(host)), text);
  ASSERT_EQ(nrt_tensor_memset(b, 0, 'z', 3), NRT_SUCCESS);
  ASSERT_EQ(nrt_tensor_read(b, out, 0, 4), NRT_SUCCESS);
  EXPECT_EQ(std::string(out, 4), "zzzr");
  // A slice is a view of the same bytes.
  nrt_tensor_t* slice = nullptr;
  ASSERT_EQ(nrt_tensor_allocate_slice(a, 100, 16, "s", &slice), NRT_SUCCESS);
  EXPECT_EQ(nrt_tensor_get_size(slice), 16u);
  EXPECT_EQ(nrt_tensor_get_va(slice), static_cast<char*>(nrt_tensor_get_va(a)) + 100);
  EXPECT_EQ(nrt_tensor_allocate_slice(a, 4090, 16, "s2", &slice), NRT_INVALID);
  // Empty tensors have no bytes until a buffer is attached.
  nrt_tensor_t* empty = nullptr;
  ASSERT_EQ(nrt_tensor_allocate_empty("e", &empty), NRT_SUCCESS);
  EXPECT_EQ(nrt_tensor_get_va(empty), nullptr);
  EXPECT_EQ(nrt_tensor_read(empty, out, 0, 1), NRT_INVALID);
  char buffer[32] = "attached";
  ASSERT_EQ(nrt_tensor_attach_buffer(empty, buffer, sizeof(buffer)), NRT_SUCCESS);
  EXPECT_EQ(nrt_tensor_get_va(empty), buffer);
  ASSERT_EQ(nrt_tensor_read(empty, out, 0, 6), NRT_SUCCESS);
  EXPECT_EQ(std::string(out, 6), "attach");
  // HOST placement is limited to 4 MB (docs/runtime.md#public-functions).
  nrt_tensor_t* big = nullptr;
  EXPECT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_HOST, -1, 5 * kMiB, "big", &big), NRT_INVALID);
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_HOST, -1, kMiB, "small", &big), NRT_SUCCESS);
  EXPECT_EQ(DsWord(0, nds::DeviceCounterOffset(nds::kMemUsageTensorsHost)), kMiB);
  nrt_tensor_free(&big);
  EXPECT_EQ(big, nullptr);
  EXPECT_EQ(DsWord(0, nds::DeviceCounterOffset(nds::kMemUsageTensorsHost)), 0u);
  for (nrt_tensor_t** t : {&a, &b, &c, &host, &slice, &empty}) nrt_tensor_free(t);
}

TEST_F(RuntimeApiTest, TensorSetsAddReplaceAndLookUpByName) {
  MakeNode("trn1.2xlarge");
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  nrt_tensor_set_t* set = nullptr;
  ASSERT_EQ(nrt_allocate_tensor_set(&set), NRT_SUCCESS);
  nrt_tensor_t *x = nullptr, *y = nullptr, *got = nullptr;
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_VIRTUAL, -1, 8, "x", &x), NRT_SUCCESS);
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_VIRTUAL, -1, 8, "y", &y), NRT_SUCCESS);
  ASSERT_EQ(nrt_add_tensor_to_tensor_set(set, "in", x), NRT_SUCCESS);
  ASSERT_EQ(nrt_get_tensor_from_tensor_set(set, "in", &got), NRT_SUCCESS);
  EXPECT_EQ(got, x);
  ASSERT_EQ(nrt_add_tensor_to_tensor_set(set, "in", y), NRT_SUCCESS);  // replaces
  ASSERT_EQ(nrt_get_tensor_from_tensor_set(set, "in", &got), NRT_SUCCESS);
  EXPECT_EQ(got, y);
  EXPECT_EQ(nrt_get_tensor_from_tensor_set(set, "missing", &got), NRT_FAILURE);
  nrt_destroy_tensor_set(&set);
  EXPECT_EQ(set, nullptr);
  nrt_tensor_free(&x);
  nrt_tensor_free(&y);
}

TEST_F(RuntimeApiTest, ModelTensorInfoDescribesInputsAndOutputs) {
  MakeNode("trn1.2xlarge");
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  nrt_model_t* m = Load(Neff(R"({"version": 1,
      "inputs": [{"name": "ids", "dtype": "int32", "shape": [16, 128]}],
      "outputs": [{"name": "logits", "dtype": "bfloat16", "shape": [16, 2]}],
      "ops": []})"));
  ASSERT_NE(m, nullptr);
  nrt_tensor_info_array_t* info = nullptr;
  ASSERT_EQ(nrt_get_model_tensor_info(m, &info), NRT_SUCCESS);
  ASSERT_EQ(info->tensor_count, 2u);
  EXPECT_STREQ(info->tensor_array[0].name, "ids");
  EXPECT_EQ(info->tensor_array[0].usage, NRT_TENSOR_USAGE_INPUT);
  EXPECT_EQ(info->tensor_array[0].dtype, NRT_DTYPE_INT32);
  EXPECT_EQ(info->tensor_array[0].size, 16u * 128 * 4);
  ASSERT_EQ(info->tensor_array[0].ndim, 2u);
  EXPECT_EQ(info->tensor_array[0].shape[1], 128u);
  EXPECT_STREQ(info->tensor_array[1].name, "logits");
  EXPECT_EQ(info->tensor_array[1].usage, NRT_TENSOR_USAGE_OUTPUT);
  EXPECT_EQ(info->tensor_array[1].size, 16u * 2 * 2);
  EXPECT_EQ(nrt_free_model_tensor_info(info), NRT_SUCCESS);
  // Executing without the input is bad input (docs/runtime.md#status-codes, 1002).
  EXPECT_EQ(nrt_execute(m, nullptr, nullptr), NRT_EXEC_BAD_INPUT);
  EXPECT_EQ(DsCounter(0, 0, nds::kInferIncorrectInput), 1u);
  nrt_tensor_set_t* in = nullptr;
  nrt_tensor_t* ids = nullptr;
  ASSERT_EQ(nrt_allocate_tensor_set(&in), NRT_SUCCESS);
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, size_t{16} * 128 * 4, "ids", &ids),
            NRT_SUCCESS);
  ASSERT_EQ(nrt_add_tensor_to_tensor_set(in, "ids", ids), NRT_SUCCESS);
  EXPECT_EQ(nrt_execute(m, in, nullptr), NRT_SUCCESS);
  nrt_destroy_tensor_set(&in);
  nrt_tensor_free(&ids);
}

TEST_F(RuntimeApiTest, DeviceMemoryOverflowIsResourceWithATable) {
  MakeNode("trn1.2xlarge");  // NC-v2: 16 GiB per core (docs/hardware.md#core-parameters)
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  nrt_vnc_memory_stats_t stats{};
  size_t written = 0;
  ASSERT_EQ(nrt_get_vnc_memory_stats(0, &stats, sizeof(stats), &written), NRT_SUCCESS);
  EXPECT_EQ(stats.bytes_limit, 16 * kGiB);
  EXPECT_EQ(stats.bytes_used, 0u);
  nrt_tensor_t *big = nullptr, *more = nullptr;
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 15 * kGiB, "big", &big),
            NRT_SUCCESS);
  EXPECT_EQ(DsCounter(0, 0, nds::kMemUsageTensorsDevice), 15 * kGiB);
  StderrCapture err(dir_.path() / "stderr.txt");
  EXPECT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 2 * kGiB, "more", &more),
            NRT_RESOURCE);
  const std::string log = err.Text();
  err.Restore();
  EXPECT_THAT(log, HasSubstr("ERROR NRT:nrt_tensor_allocate"));
  EXPECT_THAT(log, HasSubstr("tensors"));
  EXPECT_THAT(log, HasSubstr("16106127360"));  // used: 15 GiB
  EXPECT_THAT(log, HasSubstr("17179869184"));  // limit: 16 GiB
  EXPECT_EQ(DsCounter(0, 0, nds::kErrResource), 1u);
  // The other core has its own 16 GiB.
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 1, 2 * kGiB, "more", &more),
            NRT_SUCCESS);
  nrt_tensor_free(&big);
  EXPECT_EQ(DsCounter(0, 0, nds::kMemUsageTensorsDevice), 0u);
  nrt_tensor_free(&more);
}

TEST_F(RuntimeApiTest, LoadChargesMicrocodeCodeAndASharedScratchpad) {
  MakeNode("trn1.2xlarge");
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  const std::string small = Neff(R"({"version": 1, "memory": {"code": 1048576, "constants": 4096,
      "scratchpad": 536870912}, "ops": []})");
  const std::string large = Neff(R"({"version": 1, "memory": {"scratchpad": 1073741824},
      "ops": []})");
  nrt_model_t* a = Load(small, 0);
  ASSERT_NE(a, nullptr);
  // ~96 MB of microcode per physical core with the first NEFF (docs/hardware.md#device-memory),
  // plus the code.
  EXPECT_EQ(DsCounter(0, 0, nds::kMemUsageCodeDevice), 96 * kMiB + small.size() + kMiB);
  EXPECT_EQ(DsCounter(0, 0, nds::kMemUsageConstantsDevice), 4096u);
  EXPECT_EQ(DsCounter(0, 0, nds::kMemUsageScratchpadDevice), 512 * kMiB);
  EXPECT_EQ(DsCounter(0, 0, nds::kModelLoadCount), 1u);
  nrt_model_t* b = Load(large, 0);
  ASSERT_NE(b, nullptr);
  // The scratchpad is shared: the largest of the core's NEFFs; microcode is not charged twice.
  EXPECT_EQ(DsCounter(0, 0, nds::kMemUsageScratchpadDevice), 1024 * kMiB);
  EXPECT_EQ(DsCounter(0, 0, nds::kMemUsageCodeDevice),
            96 * kMiB + small.size() + kMiB + large.size());
  EXPECT_EQ(DsCounter(0, 0, nds::kModelLoadCount), 2u);
  ASSERT_EQ(nrt_unload(b), NRT_SUCCESS);
  EXPECT_EQ(DsCounter(0, 0, nds::kMemUsageScratchpadDevice), 512 * kMiB);
  ASSERT_EQ(nrt_unload(a), NRT_SUCCESS);
  EXPECT_EQ(DsCounter(0, 0, nds::kMemUsageCodeDevice), 0u);
  EXPECT_EQ(DsCounter(0, 0, nds::kMemUsageScratchpadDevice), 0u);
  // A NEFF that does not fit: NRT_RESOURCE, nothing charged.
  const std::string huge = Neff(R"({"version": 1, "memory": {"constants": 17179869184},
      "ops": []})");
  nrt_model_t* h = nullptr;
  EXPECT_EQ(nrt_load(huge.data(), huge.size(), 0, -1, &h), NRT_RESOURCE);
  EXPECT_EQ(DsCounter(0, 0, nds::kMemUsageCodeDevice), 0u);
  EXPECT_EQ(DsCounter(0, 0, nds::kMemUsageConstantsDevice), 0u);
}

TEST_F(RuntimeApiTest, Trn2LogicalCoreAtLnc2Has24GiB) {
  MakeNode("trn2.48xlarge");
  ::setenv("NEURON_RT_VISIBLE_CORES", "0", 1);
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  nrt_vnc_memory_stats_t stats{};
  ASSERT_EQ(nrt_get_vnc_memory_stats(0, &stats, sizeof(stats), nullptr), NRT_SUCCESS);
  EXPECT_EQ(stats.bytes_limit, 24 * kGiB);  // docs/hardware.md#core-parameters
  // Microcode: ~96 MB per physical core, two physical cores per logical core, whose counter sets
  // (0 and 1) split the logical core's bytes.
  nrt_model_t* m = Load(Neff(Ops("")), 0);
  ASSERT_NE(m, nullptr);
  EXPECT_GE(DsCounter(0, 0, nds::kMemUsageCodeDevice) + DsCounter(0, 1, nds::kMemUsageCodeDevice),
            192 * kMiB);
  EXPECT_GE(DsCounter(0, 1, nds::kMemUsageCodeDevice), 96 * kMiB);
}

TEST_F(RuntimeApiTest, UnmodelledPlumbingIsInvalid) {
  MakeNode("trn1.2xlarge");
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  void* va = nullptr;
  size_t size = 0;
  uint32_t id = 0;
  int fd = 0;
  EXPECT_EQ(nrt_get_hbm_mmap_va(0, 0, &va, &size), NRT_INVALID);
  EXPECT_EQ(nrt_host_device_id_get(0, &id), NRT_INVALID);
  EXPECT_EQ(nrt_get_dmabuf_fd(0, 0, &fd), NRT_INVALID);
  EXPECT_EQ(nrt_memcpy_to_device(&id, &id, 4), NRT_INVALID);
}

}  // namespace
}  // namespace neuron::nrt::testing
