// libnrt-sim's libnrt.so.1 as a monitor written from the Neuron SDK's headers alone sees it
// (docs/driver-interface.md#process-records): libnrt_client.c, plain C that knows nothing of the
// agent, dlopens the library `neuron-sim exec` puts on the library path and reads a running
// simulated workload's process information, model nodes and counters through ndl_* and nds_*.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tests/support/sim_node.h"
#include "tests/support/sim_testing.h"
#include "tests/support/subprocess.h"
#include "tests/support/suite_node.h"
#include "tests/support/temp_dir.h"

namespace neuron::testing {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

class LibnrtClientTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(sim_.node().ready()) << sim_.node().Log(); }
  RunResult Client(const std::vector<std::string>& args) {
    std::vector<std::string> argv{LIBNRT_CLIENT_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(sim_.dir().path(), sim_.node().UnderDriver(argv));
  }

  SuiteNode sim_{"libnrt-client", "trn1.2xlarge", NEURON_SIM_BIN};  // one node per test
};

TEST_F(LibnrtClientTest, ReadsAWorkloadsProcessInfoAndModelsThroughTheSdkApi) {
  const pid_t pid = sim_.node().StartUnderDriver(
      {"/usr/bin/env", "NEURON_PROCESS_TAG=client-test", "NEURON_RT_VISIBLE_CORES=1",
       NEURON_SIM_BIN, "run", "--root", sim_.node().root().string(), "--workload", "matmul",
       "--steps", "0"},
      "workload");
  ASSERT_GT(pid, 0);
  RunResult r;
  const bool seen = WaitUntil(
      [&] {
        r = Client({"0"});
        return r.code == 0 && r.out.find(" matmul ") != std::string::npos;
      },
      kSimReadyCeiling);
  ASSERT_TRUE(seen) << r.out << r.err;
  const std::string p = std::to_string(pid);
  EXPECT_THAT(r.out, HasSubstr("device 0 type 2 apps"));  // Trainium1: architecture 2
  EXPECT_THAT(r.out, ContainsRegex("process " + p +
                                   " framework=[0-9]+ tag=client-test long_tag=client-test "
                                   "runtime=2\\.28\\.0\n"));
  // The workload holds core 1: its model node says so, with the bytes it charged.
  EXPECT_THAT(r.out, ContainsRegex("model " + p + " [0-9]+ 0 matmul nc=1 device_bytes=[1-9]"));
  // A counter through nds_get_nc_counter: core 0 is not the workload's.
  EXPECT_THAT(r.out, HasSubstr("counter " + p + " nc=0 infer_completed=0\n"));
}

// Without a library the client says so; a library path that is not libnrt is refused by name.
TEST_F(LibnrtClientTest, NoLibraryIsAnError) {
  const RunResult r = Client({"0", "/nonexistent/libnrt.so.1"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("dlopen /nonexistent/libnrt.so.1"));
}

}  // namespace
}  // namespace neuron::testing
