// Core reservation across real processes (docs/architecture.md#core-reservation,
// docs/runtime.md#environment, #reservation-and-indices): VISIBLE_CORES and NUM_CORES, logical
// indices from 0, the exact failure line, cleanup after SIGKILL, the datastore's release at
// nrt_close, and the driver's limit of 16 processes per device.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/file.h>

#include <functional>
#include <span>
#include <vector>

#include "driver-sim/driver/sim_paths.h"
#include "driver-sim/runtime/records.h"
#include "tests/driver-sim/runtime/runtime_test_util.h"

namespace neuron::nrt::testing {
namespace {

using ::testing::HasSubstr;

class ReservationTest : public SimNodeTest {
 protected:
  void SetUp() override {
    SimNodeTest::SetUp();
    MakeNode("trn1.32xlarge");  // 16 devices x 2 cores
  }

  // A child that runs `setup`, reports its result through a pipe byte and then waits to be
  // killed, keeping whatever `setup` took. Returns its pid; *result gets the byte.
  pid_t Parked(const std::function<unsigned char()>& setup, unsigned char* result) {
    int ends[2];
    EXPECT_EQ(::pipe(ends), 0);
    UniqueFd result_read(ends[0]), result_write(ends[1]);
    const pid_t pid = Fork([&]() {
      result_read.Reset();
      const unsigned char r = setup();
      (void)!::write(result_write.get(), &r, 1);
      ::pause();
      return 0;
    });
    result_write.Reset();  // a child that dies before it answers then reads as EOF
    *result = 255;
    EXPECT_EQ(::read(result_read.get(), result, 1), 1);
    return pid;
  }

  // A child that reserves with `env` (NAME=VALUE). *status gets nrt_init's result.
  pid_t Holder(const std::string& name, const std::string& value, int* status) {
    unsigned char s = 255;
    const pid_t pid = Parked(
        [&] {
          ::setenv(name.c_str(), value.c_str(), 1);
          return static_cast<unsigned char>(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""));
        },
        &s);
    *status = s;
    return pid;
  }

  // A child that opens `device` (a normal open: it attaches, as a runtime or monitor does).
  pid_t Opener(int device) {
    const fs::path node = root().DevNeuron(device);
    unsigned char ok = 0;
    const pid_t pid = Parked(
        [&] { return static_cast<unsigned char>(::open(node.c_str(), O_RDONLY) >= 0); }, &ok);
    EXPECT_EQ(ok, 1) << "child " << pid << " could not open " << node;
    return pid;
  }

  static void Kill(pid_t pid) {
    if (pid <= 0) return;  // a failed fork: kill(-1) would hit every process we may signal
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
};

TEST_F(ReservationTest, AllCoresByDefault) {
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  uint32_t n = 0;
  ASSERT_EQ(nrt_get_visible_vnc_count(&n), NRT_SUCCESS);
  EXPECT_EQ(n, 32u);
}

TEST_F(ReservationTest, VisibleCoresAreNumberedFromZeroInsideTheProcess) {
  ::setenv("NEURON_RT_VISIBLE_CORES", "3-4", 1);
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  uint32_t n = 0;
  ASSERT_EQ(nrt_get_visible_vnc_count(&n), NRT_SUCCESS);
  EXPECT_EQ(n, 2u);
  nrtsim_core_info_t info{};
  ASSERT_EQ(nrtsim_get_core_info(0, &info), NRT_SUCCESS);
  // docs/hardware.md#instance-catalog: trn1 device d holds cores 2d, 2d+1
  EXPECT_EQ(info.global_core, 3u);
  EXPECT_EQ(info.device, 1u);
  EXPECT_EQ(info.device_core, 1u);
  ASSERT_EQ(nrtsim_get_core_info(1, &info), NRT_SUCCESS);
  EXPECT_EQ(info.global_core, 4u);
  EXPECT_EQ(info.device, 2u);
  EXPECT_EQ(info.device_core, 0u);
  EXPECT_EQ(nrtsim_get_core_info(2, &info), NRT_INVALID);
  // Logical core 1 is global core 4: its model shows in device 2's datastore, slot 0.
  nrt_model_t* m = Load(Neff(Ops("")), 1);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(DsCounter(2, 0, nds::kModelLoadCount), 1u);
  EXPECT_EQ(DsCounter(1, 1, nds::kModelLoadCount), 0u);
  // The lock files of global cores 3 and 4 are held; 5 is free.
  for (int core : {3, 4, 5}) {
    const UniqueFd fd(::open((neuron::sim::CoreLockDir(root()) / std::to_string(core)).c_str(),
                             O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    ASSERT_TRUE(fd.valid());
    EXPECT_EQ(::flock(fd.get(), LOCK_EX | LOCK_NB) == 0, core == 5) << "core " << core;
  }
}

TEST_F(ReservationTest, MalformedOrOutOfRangeVisibleCoresAreInvalid) {
  for (const char* v : {"3,5,6", "31-32", "x"}) {
    ::setenv("NEURON_RT_VISIBLE_CORES", v, 1);
    EXPECT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_INVALID) << v;
  }
  ::unsetenv("NEURON_RT_VISIBLE_CORES");
  ::setenv("NEURON_RT_NUM_CORES", "-2", 1);
  EXPECT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_INVALID);
}

TEST_F(ReservationTest, NumCoresTakesTheFirstFreeRunLargeEnough) {
  int status = -1;
  const pid_t holder = Holder("NEURON_RT_VISIBLE_CORES", "1-2", &status);
  ASSERT_EQ(status, NRT_SUCCESS);
  // Core 0 alone is too short for 3: first fit is 3-5 (docs/runtime.md#reservation-and-indices).
  ::setenv("NEURON_RT_NUM_CORES", "3", 1);
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  nrtsim_core_info_t info{};
  ASSERT_EQ(nrtsim_get_core_info(0, &info), NRT_SUCCESS);
  EXPECT_EQ(info.global_core, 3u);
  nrt_close();
  // 29 cores (3-31) is the longest free run: 30 fail with the searched window and that run.
  ::setenv("NEURON_RT_NUM_CORES", "30", 1);
  StderrCapture err(dir_.path() / "err.txt");
  EXPECT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_RESOURCE);
  const std::string log = err.Text();
  err.Restore();
  EXPECT_THAT(log, HasSubstr("ERROR NRT:nrt_allocate_neuron_cores NeuronCore(s) not available - "
                             "Requested:nc0-nc31 Available:29"));
  ::setenv("NEURON_RT_NUM_CORES", "29", 1);
  EXPECT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  Kill(holder);
}

TEST_F(ReservationTest, SecondProcessForTheSameCoreGetsResourceAndTheLogLine) {
  int status = -1;
  const pid_t holder = Holder("NEURON_RT_VISIBLE_CORES", "1", &status);
  ASSERT_EQ(status, NRT_SUCCESS);
  const fs::path err = dir_.path() / "second.err";
  const pid_t second = Fork(
      [] {
        ::setenv("NEURON_RT_VISIBLE_CORES", "1", 1);
        return static_cast<int>(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""));
      },
      err);
  EXPECT_EQ(WaitChild(second), NRT_RESOURCE);
  // The troubleshooting guide's line (docs/runtime.md#reservation-and-indices).
  EXPECT_THAT(ReadFileText(err),
              HasSubstr("ERROR NRT:nrt_allocate_neuron_cores NeuronCore(s) not available - "
                        "Requested:nc1-nc1 Available:0"));
  Kill(holder);
}

TEST_F(ReservationTest, KilledOwnersCoresAreFreeAtOnce) {
  int status = -1;
  const pid_t holder = Holder("NEURON_RT_NUM_CORES", "0", &status);  // 0: all cores
  ASSERT_EQ(status, NRT_SUCCESS);
  ::setenv("NEURON_RT_VISIBLE_CORES", "31", 1);
  {
    StderrCapture quiet(dir_.path() / "err.txt");
    EXPECT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_RESOURCE);
  }
  Kill(holder);  // SIGKILL: no nrt_close, the kernel drops the flocks
  EXPECT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
}

TEST_F(ReservationTest, CloseReleasesTheCoresAndTheDatastore) {
  ::setenv("NEURON_RT_VISIBLE_CORES", "0", 1);
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  ASSERT_NE(Load(Neff(Ops("")), 0), nullptr);
  EXPECT_EQ(DsCounter(0, 0, nds::kModelLoadCount), 1u);
  nrt_close();
  // RELEASE_NEURON_DS: the driver folded the counters into sysfs, then freed the slot, so a
  // monitor's ACQUIRE for this PID finds nothing (ENOENT).
  EXPECT_FALSE(neuron::testing::ReadDatastoreBytes(root().DevNeuron(0), ::getpid()).has_value());
  EXPECT_EQ(ReadFileText(tree_->OtherInfoDir(0, 0, "model_load_count") / "total"), "1\n");
  const pid_t other = Fork([] {
    ::setenv("NEURON_RT_VISIBLE_CORES", "0", 1);
    return static_cast<int>(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""));
  });
  EXPECT_EQ(WaitChild(other), NRT_SUCCESS);
}

TEST_F(ReservationTest, ProcessTagAndRuntimeVersionGoToTheDatastore) {
  ::setenv("NEURON_RT_VISIBLE_CORES", "0", 1);
  ::setenv("NEURON_PROCESS_TAG", "llama-worker-7", 1);
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_PYTORCH, "2.1.0", ""), NRT_SUCCESS);
  const std::optional<std::vector<uint8_t>> ds =
      neuron::testing::ReadDatastoreBytes(root().DevNeuron(0), ::getpid());
  ASSERT_TRUE(ds.has_value());
  ASSERT_EQ(ds->size(), nds::kSize);
  // The records in libnrt-sim's own format, read back as its nds_* functions read them.
  const std::span<const uint8_t> area(ds->data() + nrt::records::kAreaOffset,
                                      nrt::records::kAreaSize);
  nds_process_info_t info;
  nds_process_info_ext_t ext;
  ASSERT_EQ(nrt::records::ReadProcessInfo(area, &info, &ext), nrt::records::ReadResult::kOk);
  EXPECT_STREQ(ext.tag, "llama-worker-7");
  EXPECT_STREQ(info.tag, "llama-worker-7");
  EXPECT_EQ(info.framework_type, NRT_FRAMEWORK_TYPE_PYTORCH);
  EXPECT_EQ(info.framework_version.major, 2);
  EXPECT_EQ(info.runtime_version.minor, 28);
  // RUNTIME_VERSION packs major in bits 40-47: a 2.x runtime.
  EXPECT_EQ((DsWord(0, nds::DeviceCounterOffset(nds::kRuntimeVersion)) >> 40) & 0xff, 2u);
}

TEST_F(ReservationTest, SixteenProcessesPerDeviceAtMost) {
  // 16 live processes attached to device 0 (docs/driver-interface.md#abi-open-semantics: the 17th
  // open gets EBUSY).
  std::vector<pid_t> sleepers;
  for (int i = 0; i < 16; ++i) sleepers.push_back(Opener(0));
  ::setenv("NEURON_RT_VISIBLE_CORES", "0", 1);
  {
    StderrCapture err(dir_.path() / "err.txt");
    EXPECT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_RESOURCE);
    EXPECT_THAT(err.Text(), HasSubstr("nd0: pid " + std::to_string(::getpid()) +
                                      " failed to open: 16 processes already use the device"));
  }
  // Device 1 is another device.
  ::setenv("NEURON_RT_VISIBLE_CORES", "2", 1);
  EXPECT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  nrt_close();
  Kill(sleepers.back());  // one leaves: the driver detaches it when its connection ends
  sleepers.pop_back();
  ASSERT_TRUE(WaitUntil(
      [&] { return UniqueFd(::open(root().DevNeuron(0).c_str(), O_RDONLY | O_CLOEXEC)).valid(); },
      10s));
  ::setenv("NEURON_RT_VISIBLE_CORES", "0", 1);
  EXPECT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  for (pid_t p : sleepers) Kill(p);
}

}  // namespace
}  // namespace neuron::nrt::testing
