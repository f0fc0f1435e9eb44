// The runtimes' records reach the agent only through libnrt's public API
// (docs/driver-interface.md#process-records, docs/OPERATIONS.md#libnrt): the exporter, neuron-ls
// and neuron-top load libnrt.so.1 (here libnrt-sim's, which `neuron-sim exec` puts on the
// library path) and read a simulated workload's tag, models and runtime version through it. When
// the library cannot be loaded, or the runtime's records are in a format it does not read, the
// records are unknown, not empty: source_up{source="runtime_records"} 0, the reason in the log
// and on the tools' screens, no model names, and every counter still there.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "core/base/unique_fd.h"
#include "core/driver/datastore_layout.h"
#include "driver-sim/driver/datastore_writer.h"
#include "driver-sim/runtime/records.h"
#include "tests/support/http_client.h"
#include "tests/support/sim_node.h"
#include "tests/support/sim_testing.h"
#include "tests/support/subprocess.h"
#include "tests/support/suite_node.h"
#include "tests/support/temp_dir.h"

namespace neuron::testing {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

constexpr char kTag[] = "records-test";

class RuntimeRecordsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(sim_.node().ready()) << sim_.node().Log(); }

  // A matmul workload on core 1 with NEURON_PROCESS_TAG set, started (not yet run a step).
  pid_t StartWorkload() {
    const pid_t pid = sim_.node().StartUnderDriver(
        {"/usr/bin/env", std::string("NEURON_PROCESS_TAG=") + kTag, "NEURON_RT_VISIBLE_CORES=1",
         NEURON_SIM_BIN, "run", "--root", sim_.node().root().string(), "--workload", "matmul",
         "--steps", "0"},
        "workload");
    EXPECT_GT(pid, 0);
    return pid;
  }

  // The exporter under the simulated driver with `extra` flags; its port, 0 on failure.
  int StartExporter(const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> argv{NEURON_EXPORTER_BIN,
                                  "--root",
                                  sim_.node().root().string(),
                                  "--no-pod-resources",
                                  "--web.listen-address",
                                  "127.0.0.1:0",
                                  "--compat"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    if (sim_.node().StartUnderDriver(argv, name) <= 0) return 0;
    int port = 0;
    WaitUntil([&] { return (port = ListeningPort(Log(name))) > 0; }, 60s);
    return port;
  }
  std::string Log(const std::string& name) const {
    return ReadFile(sim_.node().logs() / (name + ".err"));
  }
  // Scrapes until `pred` holds (or the ceiling passes); the last body.
  std::string ScrapeUntil(int port, const std::function<bool(const std::string&)>& pred) {
    std::string body;
    WaitUntil(
        [&] {
          body = HttpGet(port, "/metrics").body;
          return pred(body);
        },
        kSimReadyCeiling);
    return body;
  }
  RunResult Ls(const std::vector<std::string>& extra) {
    std::vector<std::string> argv{NEURON_LS_BIN, "--root", sim_.node().root().string(), "--wide"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunCommand(sim_.dir().path(), sim_.node().UnderDriver(argv));
  }
  RunResult TopSnapshot(const std::vector<std::string>& extra) {
    std::vector<std::string> argv{
        NEURON_TOP_BIN, "--root",     sim_.node().root().string(),
        "--snapshot",   "--log-file", (sim_.dir().path() / "top.log").string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunCommand(sim_.dir().path(), sim_.node().UnderDriver(argv));
  }

  SuiteNode sim_{"runtime-records", "trn1.2xlarge", NEURON_SIM_BIN};  // one node per test
};

bool Has(const std::string& body, const std::string& text) {
  return body.find(text) != std::string::npos;
}

TEST_F(RuntimeRecordsTest, TagModelsAndVersionThroughLibnrt) {
  const pid_t pid = StartWorkload();
  const int port = StartExporter("exporter", {});
  ASSERT_GT(port, 0) << Log("exporter");
  const std::string body = ScrapeUntil(port, [](const std::string& b) {
    return Has(b, "runtime_tag=\"records-test\"") &&
           Has(b, "neuron_exporter_source_up{source=\"runtime_records\"} 1");
  });
  EXPECT_THAT(body, HasSubstr("neuron_exporter_source_up{source=\"runtime_records\"} 1"));
  EXPECT_THAT(body, ContainsRegex("execution_status_total\\{[^}]*runtime_tag=\"records-test\""));
  EXPECT_THAT(Log("exporter"), HasSubstr("runtime records through libnrt.so.1"));

  const RunResult ls = Ls({});
  EXPECT_EQ(ls.code, 0) << ls.err;
  EXPECT_THAT(ls.out, ContainsRegex(std::to_string(pid) + " .*2\\.28\\.0"));
  const RunResult top = TopSnapshot({});
  ASSERT_EQ(top.code, 0) << top.err;
  const nlohmann::json view = nlohmann::json::parse(top.out);
  EXPECT_EQ(view["runtime_records"]["up"], true);
  EXPECT_EQ(view["processes"][0]["tag"], kTag);
  EXPECT_EQ(view["processes"][0]["runtime_version"], "2.28.0");
  EXPECT_EQ(view["memory_details"][0]["neuroncores"][1]["models"][0]["name"], "matmul");
}

TEST_F(RuntimeRecordsTest, WithoutLibnrtRecordsAreUnknownAndCountersStay) {
  const pid_t pid = StartWorkload();
  const int port = StartExporter("exporter", {"--libnrt", "/nonexistent/libnrt.so.1"});
  ASSERT_GT(port, 0) << Log("exporter");
  // Until the runtime has counted an execution (its first can take seconds under ASan): the
  // counters are what must not depend on libnrt.
  const std::regex executed("neuroncore_executions_total\\{[^}]*neuroncore=\"1\"\\} [1-9]");
  const std::string body = ScrapeUntil(port, [&](const std::string& b) {
    return Has(b, "runtime_tag=\"" + std::to_string(pid) + "\"") && std::regex_search(b, executed);
  });
  EXPECT_THAT(body, HasSubstr("neuron_exporter_source_up{source=\"runtime_records\"} 0"));
  EXPECT_THAT(body, HasSubstr("neuron_exporter_source_up{source=\"datastore\"} 1"));
  // The PID stands in for the tag; the counters are all there.
  EXPECT_THAT(body, Not(HasSubstr(kTag)));
  EXPECT_THAT(body, ContainsRegex("neuroncore_executions_total\\{[^}]*neuroncore=\"1\"\\} [1-9]"));
  EXPECT_THAT(Log("exporter"),
              HasSubstr("source runtime_records is down: cannot load libnrt (/nonexistent"));

  const RunResult ls = Ls({"--libnrt", "/nonexistent/libnrt.so.1"});
  EXPECT_EQ(ls.code, 0) << ls.err;
  EXPECT_THAT(ls.err, HasSubstr("runtime versions unknown (NA): cannot load libnrt"));
  EXPECT_THAT(ls.out, ContainsRegex(std::to_string(pid) + " .*NA"));
  const RunResult top = TopSnapshot({"--libnrt", "/nonexistent/libnrt.so.1"});
  ASSERT_EQ(top.code, 0) << top.err;
  const nlohmann::json view = nlohmann::json::parse(top.out);
  EXPECT_EQ(view["runtime_records"]["up"], false);
  EXPECT_THAT(view["runtime_records"]["reason"].get<std::string>(),
              HasSubstr("cannot load libnrt (/nonexistent/libnrt.so.1"));
  EXPECT_THAT(view["notes"].dump(), HasSubstr("models and process tags unknown: cannot load"));
  EXPECT_EQ(view["processes"][0]["tag"], std::to_string(pid));
  EXPECT_TRUE(view["processes"][0]["runtime_version"].is_null()) << "NA";
  EXPECT_TRUE(view["memory_details"][0]["neuroncores"][1]["models"].empty());
}

// This test process is the runtime: it claims its datastore as libnrt-sim does and writes its
// records in a format version libnrt-sim's reader does not know.
TEST_F(RuntimeRecordsTest, RecordsOfAnUnknownVersionAreUnknownNotEmpty) {
  const UniqueFd fd(::open(sim_.node().paths().DevNeuron(0).c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  absl::StatusOr<std::unique_ptr<sim::DatastoreWriter>> ds =
      sim::DatastoreWriter::Acquire(fd.get(), 0, ::getpid());
  ASSERT_TRUE(ds.ok()) << ds.status();
  nrt::records::Writer records((*ds)->ObjectArea(), /*version=*/7);
  ASSERT_TRUE((*ds)->SetCoreCounter(0, nds::kInferCompleted, 5).ok());
  ASSERT_TRUE((*ds)->SetCoreCounter(0, nds::kTimeInUse, 1000).ok());
  const int port = StartExporter("exporter", {});
  ASSERT_GT(port, 0) << Log("exporter");
  const std::string body = ScrapeUntil(port, [](const std::string& b) {
    return Has(b, "neuron_exporter_source_up{source=\"runtime_records\"} 0");
  });
  EXPECT_THAT(body, HasSubstr("neuron_exporter_source_up{source=\"runtime_records\"} 0"));
  EXPECT_THAT(body, ContainsRegex("neuroncore_executions_total\\{[^}]*neuroncore=\"0\"\\} 5"));
  EXPECT_THAT(body, ContainsRegex("runtime_tag=\"" + std::to_string(::getpid()) + "\""));
  EXPECT_THAT(Log("exporter"), ContainsRegex("runtime records unreadable: neuron0 pid " +
                                             std::to_string(::getpid()) +
                                             ": nds_read_process_info: Protocol error"));
  (*ds)->Release();
}

}  // namespace
}  // namespace neuron::testing
