// neuron-top's view model, keys and painting on hand-built snapshots whose deltas are known
// exactly: what the screen and --snapshot show for given counters (docs/tools-ux.md#top-layout,
// #top-data).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/driver/datastore_layout.h"
#include "top/format.h"
#include "top/layout.h"
#include "top/screen.h"
#include "top/ui_state.h"
#include "top/view_model.h"

namespace neuron::top {
namespace {

using std::chrono::seconds;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kPid = 4711;

Inventory Trn1Inventory(int devices) {
  Inventory inv;
  inv.instance_type = "trn1.32xlarge";
  inv.instance_id = "i-0123456789abcdef0";
  inv.lnc = 1;
  inv.driver = {std::string(NewestGeneration().source_version), &NewestGeneration()};
  for (int d = 0; d < devices; ++d) {
    NeuronDevice dev;
    dev.index = d;
    dev.physical_cores = 2;
    dev.nc_arch_type = "NCv2";
    dev.memory_bytes = 34359738368;  // 32 GiB
    inv.devices.push_back(dev);
  }
  return inv;
}

int SysfsCategory(std::string_view name) {
  for (size_t i = 0; i < kDeviceMemCategories.size(); ++i) {
    if (kDeviceMemCategories[i] == name) return static_cast<int>(i);
  }
  return -1;
}
int HostCategory(std::string_view name) {
  for (size_t i = 0; i < kHostMemCategories.size(); ++i) {
    if (kHostMemCategories[i] == name) return static_cast<int>(i);
  }
  return -1;
}

// One trn1 device; `busy0` = nc_time_in_use of core 0 (µs), `flops0` = its flop_count;
// `ds_busy1` / `ds_mac1` = the runtime's live TIME_IN_USE / MAC_COUNT on core slot 1.
Snapshot MakeSnapshot(std::chrono::steady_clock::time_point t, uint64_t busy0, uint64_t flops0,
                      std::optional<uint64_t> ds_busy1, uint64_t ds_mac1) {
  Snapshot s;
  s.generation = 1;
  s.steady = t;
  s.lnc = 1;
  s.datastore_source = {true, true, ""};  // the live datastores were read
  DeviceSample d;
  d.index = 0;
  d.state = DeviceState::kReady;
  d.hardware = {0, 0, 0};
  for (size_t i = 0; i < d.host_mem.size(); ++i) d.host_mem[i].total = 0;
  d.host_mem[HostCategory("dma_buffers")].total = 10;
  d.host_mem[HostCategory("tensors")].total = 20;
  d.host_mem[HostCategory("constants")].total = 30;
  d.host_mem[HostCategory("application_memory")].total = 40;
  d.host_mem[HostCategory("driver_memory")].total = 4194304;
  for (int p = 0; p < 2; ++p) {
    CoreSample c;
    c.physical_index = p;
    for (auto& st : c.status) st.total = 0;
    for (auto member : OtherInfoCounters::Members()) (c.other_info.*member).total = 0;
    c.other_info.nc_time_in_use.total = p == 0 ? busy0 : 0;
    c.other_info.flop_count.total = p == 0 ? flops0 : 0;
    c.device_mem.total = 1550;  // 1500 in the five categories + 50 driver memory
    c.host_mem.total = p == 0 ? 4194304 : 0;
    for (auto& m : c.device_mem_by_category) m.total = 0;
    c.device_mem_by_category[SysfsCategory("model_code")].total = 100;
    c.device_mem_by_category[SysfsCategory("tensors")].total = 200;
    c.device_mem_by_category[SysfsCategory("constants")].total = 300;
    c.device_mem_by_category[SysfsCategory("model_shared_scratchpad")].total = 400;
    c.device_mem_by_category[SysfsCategory("runtime_memory")].total = 500;
    c.device_mem_by_category[SysfsCategory("driver_memory")].total = 50;
    d.cores.push_back(c);
  }
  s.devices.push_back(d);
  if (ds_busy1) {
    DatastoreRecord r;
    r.device = 0;
    r.pid = kPid;
    r.core_counters[1][nds::kTimeInUse] = *ds_busy1;
    r.core_counters[1][nds::kMacCount] = ds_mac1;
    r.core_counters[1][nds::kMemUsageTensorsDevice] = 64;
    r.core_counters[1][nds::kMemUsageCodeDevice] = 32;
    r.device_counters[nds::kMemUsageTensorsHost] = 8;
    s.processes.push_back(r);
    // Its records, as libnrt reads them.
    RuntimeRecords rr{.device = 0, .pid = kPid};
    rr.process.long_tag = "bert-infer";
    rr.process.runtime_version = {2, 21, 7};
    RuntimeModel m;
    m.model_id = 10027;
    m.name = "bert_large_b16";
    m.nc_index = 1;
    m.memory[RuntimeModel::kLocationDevice][1].total_size = 64;  // TENSORS
    m.memory[RuntimeModel::kLocationDevice][0].total_size = 32;  // CODE
    m.memory[RuntimeModel::kLocationHost][1].total_size = 8;
    rr.models.push_back(m);
    s.runtime_records.records.push_back(rr);
    s.runtime_records.state = {true, true, ""};
  }
  return s;
}

struct Fixture {
  Inventory inv = Trn1Inventory(1);
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  // One second apart: core 0 busy 0.5 s with 2 TFLOP; slot 1 busy 0.25 s with 1e12 MAC.
  Snapshot before = MakeSnapshot(t0, 1000000, 5000000000000, 0, 0);
  Snapshot after = MakeSnapshot(t0 + seconds(1), 1500000, 7000000000000, 250000, 1000000000000);
  ProcSample proc_before;
  ProcSample proc_after;
  std::map<int, ProcessDetails> details;

  Fixture() {
    SystemCpuTimes sys;
    sys.cpus = 4;
    sys.user = 100;
    sys.system = 50;
    sys.idle = 850;
    proc_before.system = sys;
    sys.user = 200;
    sys.system = 100;
    sys.idle = 1700;
    proc_after.system = sys;
    ProcessStat st;
    st.pid = kPid;
    st.start_time = 7;
    st.utime = 10;
    proc_before.processes[kPid] = st;
    st.utime = 60;
    st.stime = 20;
    proc_after.processes[kPid] = st;
    proc_before.at = t0;
    proc_after.at = t0 + seconds(1);
    PodIdentity pod;
    pod.uid = "a1b2c3d4-0000-1111-2222-333344445555";
    details[kPid] = ProcessDetails{"python3 serve.py", pod, true};
  }

  TopView Build(bool with_before = true) const {
    ViewInputs in;
    in.inventory = &inv;
    in.before = with_before ? &before : nullptr;
    in.after = &after;
    in.proc_before = with_before ? &proc_before : nullptr;
    in.proc_after = &proc_after;
    in.details = &details;
    in.ticks_per_second = 100;
    return BuildView(in);
  }
};

std::string Frame(const TopView& v, const UiState& ui, int w = 140, int h = 44) {
  return Paint(&v, ui, ComputeLayout(RequestFor(&v, ui, w, h)), "9.9").Text();
}

TEST(ViewModelTest, AllTabFromSysfsPlusLiveDatastores) {
  const Fixture f;
  const TopView v = f.Build();
  EXPECT_EQ(v.nc_version, "v2");
  EXPECT_EQ(v.runtime_attached, true);
  ASSERT_EQ(v.apps.size(), 2u);
  const AppView& all = v.apps[0];
  ASSERT_EQ(all.grid.size(), 1u);
  ASSERT_EQ(all.grid[0].cores.size(), 2u);
  EXPECT_DOUBLE_EQ(*all.grid[0].cores[0].utilization, 0.5);
  EXPECT_DOUBLE_EQ(*all.grid[0].cores[1].utilization, 0.25);
  EXPECT_DOUBLE_EQ(*all.average_utilization, 0.375);
  EXPECT_DOUBLE_EQ(*all.grid[0].cores[0].flops_per_s, 2e12);
  EXPECT_DOUBLE_EQ(*all.grid[0].cores[1].flops_per_s, 2e12);  // 2 x MAC
  // vCPU: Δuser 100, Δsystem 50 of Δtotal 1000 ticks; runtime 50 + 20 ticks of 4 CPUs x 100.
  EXPECT_DOUBLE_EQ(*v.system_cpu.user, 0.1);
  EXPECT_DOUBLE_EQ(*v.system_cpu.system, 0.05);
  EXPECT_DOUBLE_EQ(*all.runtime_cpu.user, 0.125);
  EXPECT_DOUBLE_EQ(*all.runtime_cpu.system, 0.05);
  // Memory: two cores of 1550 bytes; categories from sysfs.
  EXPECT_EQ(all.device.total, 3100u);
  EXPECT_EQ(all.device.categories[kTensors], 400u);
  EXPECT_EQ(all.device.categories[kConstants], 600u);
  EXPECT_EQ(all.device.categories[kModelCode], 200u);
  EXPECT_EQ(all.device.categories[kRuntimeMemory], 1000u);
  EXPECT_EQ(all.device.categories[kScratchpad], 800u);
  EXPECT_EQ(all.host.total, 10u + 20u + 30u + 40u + 4194304u);
  EXPECT_EQ(all.host.dma_buffers, 10u);
  EXPECT_EQ(all.host.app_memory, 40u);
  ASSERT_EQ(all.memory_tree.size(), 1u);
  ASSERT_EQ(all.memory_tree[0].cores.size(), 2u);
  ASSERT_EQ(all.memory_tree[0].cores[1].models.size(), 1u);
  EXPECT_EQ(all.memory_tree[0].cores[1].models[0].name, "bert_large_b16");
  EXPECT_EQ(all.memory_tree[0].cores[1].models[0].device_bytes, 96u);
  EXPECT_EQ(all.memory_tree[0].cores[1].models[0].host_bytes, 8u);
}

// Records libnrt could not give (no library, a format it does not read) are unknown: the PID
// stands in for the tag, the version is NA, no model is listed, and a status line says why. The
// counters are untouched.
TEST(ViewModelTest, UnknownRecordsAreNotEmptyRecords) {
  Fixture f;
  f.after.runtime_records.records.clear();
  f.after.runtime_records.state = {true, false, "cannot load libnrt (libnrt.so.1: not found)"};
  const TopView v = f.Build();
  ASSERT_EQ(v.apps.size(), 2u);
  EXPECT_EQ(v.apps[1].label, std::to_string(kPid));
  EXPECT_EQ(v.processes[0].runtime_version, "NA");
  EXPECT_TRUE(v.apps[0].memory_tree[0].cores[1].models.empty());
  EXPECT_EQ(v.apps[1].device.total, 96u) << "counters do not need the records";
  EXPECT_DOUBLE_EQ(*v.apps[0].grid[0].cores[1].utilization, 0.25);
  EXPECT_THAT(StatusLines(v),
              Contains("models and process tags unknown: cannot load libnrt (libnrt.so.1: not "
                       "found)"));
  const nlohmann::json j = nlohmann::json::parse(ViewToJson(v));
  EXPECT_EQ(j["runtime_records"]["up"], false);
  EXPECT_EQ(j["runtime_records"]["reason"], "cannot load libnrt (libnrt.so.1: not found)");
}

TEST(ViewModelTest, ProcessTabAndRow) {
  const Fixture f;
  const TopView v = f.Build();
  const AppView& app = v.apps[1];
  EXPECT_EQ(app.label, "bert-infer");  // NEURON_PROCESS_TAG
  EXPECT_EQ(app.pid, kPid);
  EXPECT_DOUBLE_EQ(*app.grid[0].cores[1].utilization, 0.25);
  EXPECT_DOUBLE_EQ(*app.grid[0].cores[0].utilization, 0.0);
  EXPECT_DOUBLE_EQ(*app.average_utilization, 0.25);  // over the cores it uses
  EXPECT_EQ(app.device.total, 96u);
  EXPECT_EQ(app.device.categories[kTensors], 64u);
  EXPECT_EQ(app.device.categories[kModelCode], 32u);
  EXPECT_EQ(app.host.tensors, 8u);
  ASSERT_EQ(v.processes.size(), 1u);
  const ProcessRow& row = v.processes[0];
  EXPECT_EQ(row.pid, kPid);
  EXPECT_EQ(row.core_ids, (std::vector<int>{1}));
  EXPECT_EQ(row.devices, (std::vector<int>{0}));
  EXPECT_EQ(row.command, "python3 serve.py");
  EXPECT_EQ(row.runtime_version, "2.21.7");
  EXPECT_DOUBLE_EQ(*row.cpu, 0.7);  // 70 ticks in 1 s at 100 ticks/s
  ASSERT_TRUE(row.pod.has_value());
  EXPECT_EQ(row.pod->uid, "a1b2c3d4-0000-1111-2222-333344445555");
}

TEST(ViewModelTest, FirstSampleHasNoRatesAndJsonSaysNull) {
  const Fixture f;
  const TopView v = f.Build(/*with_before=*/false);
  EXPECT_FALSE(v.apps[0].grid[0].cores[0].utilization.has_value());
  EXPECT_FALSE(v.system_cpu.user.has_value());
  const nlohmann::json j = nlohmann::json::parse(ViewToJson(v));
  EXPECT_TRUE(j["devices"][0]["neuroncores"][0]["utilization_ratio"].is_null());
  EXPECT_TRUE(j["system_vcpu"]["user_ratio"].is_null());
  EXPECT_TRUE(j["processes"][0]["cpu_ratio"].is_null());
  EXPECT_EQ(j["memory"]["device"]["total_bytes"], 3100);
  EXPECT_EQ(j["memory"]["device"]["capacity_bytes"], 34359738368u);
}

TEST(ViewModelTest, SnapshotJsonInBaseUnits) {
  const Fixture f;
  const nlohmann::json j = nlohmann::json::parse(ViewToJson(f.Build()));
  EXPECT_EQ(j["instance_type"], "trn1.32xlarge");
  EXPECT_EQ(j["neuroncore_version"], "v2");
  EXPECT_EQ(j["runtime_attached"], true);
  EXPECT_DOUBLE_EQ(j["devices"][0]["neuroncores"][0]["utilization_ratio"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["devices"][0]["neuroncores"][1]["flops_per_second"].get<double>(), 2e12);
  EXPECT_EQ(j["devices"][0]["state"], "READY");
  EXPECT_EQ(j["memory"]["device"]["by_category_bytes"]["tensors"], 400);
  EXPECT_EQ(j["memory"]["host"]["dma_buffers_bytes"], 10);
  EXPECT_EQ(j["processes"][0]["pid"], kPid);
  EXPECT_EQ(j["processes"][0]["pod"]["uid"], "a1b2c3d4-0000-1111-2222-333344445555");
  EXPECT_TRUE(j["processes"][0]["pod"]["name"].is_null());
  EXPECT_EQ(j["processes"][0]["neuroncore_ids"], nlohmann::json::parse("[1]"));
  EXPECT_EQ(j["memory_details"][0]["neuroncores"][1]["models"][0]["model_id"], 10027);
}

// docs/tools-ux.md Q2: devices but no runtime -> say so.
// An unknown sysfs layout is the first note among the status lines
// (docs/driver-interface.md#detection).
TEST(ViewModelTest, UnknownDriverLayoutIsTheFirstStatusLine) {
  Inventory inv = Trn1Inventory(1);
  inv.driver = {"2.31.7.0", nullptr};
  inv.devices[0].missing_nodes = {"stats/hardware/sram_ecc_uncorrected"};
  Snapshot after;
  const TopView v = BuildView({.inventory = &inv, .after = &after});
  ASSERT_FALSE(v.notes.empty());
  EXPECT_EQ(v.notes.front(),
            "driver 2.31.7: unknown sysfs layout, 1 node missing (first: "
            "neuron0/stats/hardware/sram_ecc_uncorrected)");
  EXPECT_THAT(StatusLines(v), ::testing::Contains(v.notes.front()));
}

TEST(ViewModelTest, NoRuntimeAttached) {
  Fixture f;
  f.before = MakeSnapshot(f.t0, 0, 0, std::nullopt, 0);
  f.after = MakeSnapshot(f.t0 + seconds(1), 0, 0, std::nullopt, 0);
  const TopView v = f.Build();
  EXPECT_EQ(v.runtime_attached, false);
  EXPECT_EQ(v.apps.size(), 1u);
  const UiState ui;
  const Canvas c = Paint(&v, ui, ComputeLayout(RequestFor(&v, ui, 120, 40)), "9.9");
  EXPECT_THAT(c.Text(), HasSubstr("no Neuron runtime attached"));
  EXPECT_THAT(c.Text(), Not(HasSubstr("[0.00%]")));
  EXPECT_TRUE(StatusLines(v).empty());
}

// docs/architecture.md#unknown-is-not-zero: when the live source could not be read (or has not
// answered yet), the sysfs totals lack every running process's share, so no rate is shown: N/A on
// screen, null in JSON, the reason on a status line, and never "no Neuron runtime attached".
TEST(ViewModelTest, LiveSourceDownIsUnknownNotIdle) {
  for (const SourceState& source :
       {SourceState{true, false, "/x/dev/neuron0: permission denied"}, SourceState{}}) {
    Fixture f;
    f.before = MakeSnapshot(f.t0, 1000000, 5000000000000, std::nullopt, 0);
    f.after = MakeSnapshot(f.t0 + seconds(1), 1500000, 7000000000000, std::nullopt, 0);
    f.after.datastore_source = source;
    const TopView v = f.Build();
    EXPECT_FALSE(v.runtime_attached.has_value());
    EXPECT_FALSE(v.apps[0].grid[0].cores[0].utilization.has_value());
    EXPECT_FALSE(v.apps[0].grid[0].cores[0].flops_per_s.has_value());
    EXPECT_FALSE(v.apps[0].average_utilization.has_value());
    EXPECT_EQ(v.apps[0].device.total, 3100u);  // memory is the driver's, in sysfs
    ASSERT_EQ(StatusLines(v).size(), 1u);
    EXPECT_THAT(StatusLines(v)[0], HasSubstr(source.known ? "live data unavailable" : "unknown"));
    const std::string text = Frame(v, UiState{});
    EXPECT_THAT(text, HasSubstr(StatusLines(v)[0]));
    EXPECT_THAT(text, HasSubstr("Utilization (Avg: N/A)"));
    EXPECT_THAT(text, HasSubstr("[N/A]"));
    EXPECT_THAT(text, HasSubstr("processes unknown"));
    EXPECT_THAT(text, Not(HasSubstr("no Neuron runtime attached")));
    const nlohmann::json j = nlohmann::json::parse(ViewToJson(v));
    EXPECT_TRUE(j["runtime_attached"].is_null());
    EXPECT_TRUE(j["devices"][0]["neuroncores"][0]["utilization_ratio"].is_null());
    EXPECT_EQ(j["live_data"]["up"], source.known ? nlohmann::json(false) : nlohmann::json());
    EXPECT_EQ(j["live_data"]["reason"], LiveDataProblem(source));
  }
}

// A normal user cannot read `reset` (0600): the state is unknown, which is no reason to hide the
// cores' figures; the notes of what could not be read go to the status lines.
TEST(ViewModelTest, UnknownDeviceStateStillShowsTheCores) {
  Fixture f;
  f.before.devices[0].state.reset();
  f.after.devices[0].state.reset();
  ViewInputs in;
  const std::vector<std::string> notes{"cannot read /x/neuron0/reset: Permission denied"};
  in.inventory = &f.inv;
  in.before = &f.before;
  in.after = &f.after;
  in.notes = &notes;
  const TopView v = BuildView(in);
  EXPECT_EQ(StatusLines(v), notes);
  const std::string text = Frame(v, UiState{});
  EXPECT_THAT(text, HasSubstr("[50.00%]"));
  EXPECT_THAT(text, Not(HasSubstr("device N/A")));
  EXPECT_THAT(text, HasSubstr(notes[0]));
  EXPECT_EQ(nlohmann::json::parse(ViewToJson(v))["notes"], nlohmann::json(notes));
}

// The process row's memory is what the driver says the process allocated (GET_ALL_APPS_INFO)
// when it says so; the datastore's own counters otherwise.
TEST(ViewModelTest, ProcessMemoryFromTheDriver) {
  Fixture f;
  f.after.processes[0].driver = DriverProcessInfo{0b10, 4096, 1 << 20};
  const TopView v = f.Build();
  ASSERT_EQ(v.processes.size(), 1u);
  EXPECT_EQ(v.processes[0].device_bytes, 1u << 20);
  EXPECT_EQ(v.processes[0].host_bytes, 4096u);
  EXPECT_EQ(f.Build().apps[1].device.total, 96u);  // the tab keeps the runtime's categories
}

// What the device plugin's GET /health answers (plugin/health_api.h): three devices, one EFA.
constexpr std::string_view kAgentDocument = R"json({"generation":42,"stale":false,"devices":[
  {"device":0,"present":true,"state":"healthy","components":[],"reasons":[],"degraded":false},
  {"device":1,"present":true,"state":"unhealthy","components":["hbm","link_efa"],
   "reasons":["uncorrected ECC (hbm)","driver: unhealthy link_efa"],"degraded":false,
   "hw_errors":["HBM_UNCORRECTABLE_ERROR"]},
  {"device":2,"present":true,"state":"unknown","components":[],
   "reasons":["device state cannot be read"],"degraded":false}],
 "efas":[{"name":"rdmap16s27","present":true,"state":"healthy","components":[],"reasons":[],
          "degraded":false}],
 "node_condition":{"type":"NeuronHealth","status":"True"}})json";

// A device a check or the agent's reset withholds says so beside its state, with the reset's
// phase when the agent gives one (plugin/remediation.h).
TEST(HealthViewTest, AWithheldDeviceSaysSoAndWhy) {
  constexpr std::string_view kDocument = R"json({"generation":7,"stale":false,"devices":[
    {"device":0,"present":true,"state":"healthy","components":[],"reasons":[],"degraded":false,
     "withheld":true,"remediation":{"phase":"checking","tries":0,"message":"active check running"}},
    {"device":1,"present":true,"state":"unhealthy","components":["hbm"],
     "reasons":["uncorrected ECC (hbm)"],"degraded":false,"withheld":true},
    {"device":2,"present":true,"state":"healthy","components":[],"reasons":[],"degraded":false,
     "withheld":false}],"efas":[],"node_condition":{"type":"NeuronHealth","status":"False"}})json";
  absl::StatusOr<NodeHealthView> h = ParseAgentHealth(kDocument, "unix:/x/plugin.sock");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(HealthText(h->devices[0]), "healthy, withheld (reset checking)");
  EXPECT_EQ(HealthText(h->devices[1]), "unhealthy: hbm, withheld");
  EXPECT_EQ(HealthText(h->devices[2]), "healthy");
  EXPECT_EQ(NotHealthy(*h).size(), 2u);
}

TEST(HealthViewTest, TheAgentsAnswerBecomesRowsAndLines) {
  absl::StatusOr<NodeHealthView> h = ParseAgentHealth(kAgentDocument, "unix:/x/plugin.sock");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(AgentHealthGeneration(kAgentDocument), 42u);
  ASSERT_EQ(h->devices.size(), 3u);
  EXPECT_TRUE(h->from_agent);
  EXPECT_EQ(HealthText(h->devices[0]), "healthy");
  EXPECT_EQ(HealthText(h->devices[1]), "unhealthy: hbm,link_efa");
  EXPECT_EQ(HealthText(h->devices[2]), "unknown: device state cannot be read");
  ASSERT_EQ(h->efas.size(), 1u);
  EXPECT_EQ(h->efas[0].efa, "rdmap16s27");
  EXPECT_EQ(NotHealthy(*h).size(), 2u);
  EXPECT_EQ(HealthSummary(*h),
            "Health (agent): devices 1 healthy, 1 unhealthy, 1 unknown; EFA 1 "
            "healthy");
  EXPECT_FALSE(ParseAgentHealth("{\"devices\":[{\"device\":0}]}", "x").ok()) << "no state";
  EXPECT_FALSE(ParseAgentHealth("not json", "x").ok());

  const Fixture f;
  TopView v = f.Build();
  v.health = *h;
  const std::string text = Frame(v, UiState{});
  EXPECT_THAT(text, HasSubstr("Health (agent): devices 1 healthy, 1 unhealthy, 1 unknown"));
  EXPECT_THAT(text, HasSubstr("ND1    unhealthy: hbm,link_efa"));
  EXPECT_THAT(text, HasSubstr("ND2    unknown: device state cannot be read"));
  EXPECT_THAT(StatusLines(v), Not(Contains(HasSubstr("health"))));
  const nlohmann::json j = nlohmann::json::parse(ViewToJson(v));
  EXPECT_EQ(j["health"]["source"], "agent");
  EXPECT_EQ(j["health"]["devices"][1]["components"], nlohmann::json({"hbm", "link_efa"}));
  EXPECT_TRUE(j["health"]["notice"].is_null());
}

// Without the agent the verdicts are this read's, and the screen says so once: a status line,
// not a word on every device.
TEST(HealthViewTest, ThisReadsVerdictsSaySoOnce) {
  const Fixture f;
  TopView v = f.Build();
  EXPECT_TRUE(ViewToJson(v).find("\"health\": null") != std::string::npos) << "not asked";
  v.health.known = true;
  v.health.agent = "unix:/x/plugin.sock";
  v.health.notice = OwnReadNotice(v.health.agent, "connect unix:/x/plugin.sock: No such file");
  v.health.devices.push_back(HealthRow{.device = 0,
                                       .efa = "",
                                       .present = true,
                                       .state = HealthState::kHealthy,
                                       .components = {},
                                       .reasons = {},
                                       .degraded = true});
  const std::vector<std::string> lines = StatusLines(v);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "health from this read only (agent at unix:/x/plugin.sock not reachable: connect "
            "unix:/x/plugin.sock: No such file): ECC history and kernel-log records not judged");
  const std::string text = Frame(v, UiState{}, 200, 44);
  EXPECT_THAT(text, HasSubstr("Health (this read only): devices 1 healthy"));
  EXPECT_THAT(text, HasSubstr("ND0    healthy, degraded"));
  EXPECT_THAT(text, HasSubstr("ECC history and kernel-log records not judged"));
  const nlohmann::json j = nlohmann::json::parse(ViewToJson(v));
  EXPECT_EQ(j["health"]["source"], "this read only");
  EXPECT_EQ(j["health"]["devices"][0]["degraded"], true);
}

TEST(ScreenTest, SectionsShowTheFigures) {
  const Fixture f;
  const TopView v = f.Build();
  UiState ui;
  const std::string text = Frame(v, ui);
  EXPECT_THAT(text, HasSubstr("neuron-top 9.9 running on i-0123456789abcdef0 (trn1.32xlarge)"));
  EXPECT_THAT(text, HasSubstr("NeuronCore v2 Utilization (Avg: 37.50%)"));
  EXPECT_THAT(text, HasSubstr("[50.00%]"));
  EXPECT_THAT(text, HasSubstr("[25.00%]"));
  EXPECT_THAT(text, HasSubstr("System vCPU Usage"));
  EXPECT_THAT(text, HasSubstr("[10.00%, 5.00%]"));  // [%5.2f%%,%5.2f%%]
  EXPECT_THAT(text, HasSubstr("[12.50%, 5.00%]"));
  EXPECT_THAT(text, HasSubstr("Device Used Memory  Total: 3.0KB"));
  EXPECT_THAT(text, HasSubstr("Memory Usage Details"));
  EXPECT_THAT(text, HasSubstr("[+] ND 0"));
  EXPECT_THAT(text, HasSubstr("Neuron Apps"));
  EXPECT_THAT(text, HasSubstr(">[1]:all<"));
  EXPECT_THAT(text, HasSubstr("[2]:bert-infer"));
  EXPECT_THAT(text, HasSubstr("a1b2c3d4-0000-11..."));  // the UID, cut to the column
  EXPECT_THAT(text, HasSubstr("python3 serve.py"));
}

// A bar's cells from `x`, `width` wide: how many ticks lead, or -1 unless it is ticks in the fill
// style then blanks in the empty style (so it reads right without colour:
// docs/tools-ux.md#top-colours).
int BarTicks(const Canvas& c, int y, int x, int width, Style fill, Style rest) {
  int ticks = 0;
  while (ticks < width && c.at(y, x + ticks).ch == U'|') {
    if (c.at(y, x + ticks).style != fill) return -1;
    ++ticks;
  }
  for (int i = ticks; i < width; ++i) {
    if (c.at(y, x + i).ch != U' ' || c.at(y, x + i).style != rest) return -1;
  }
  return ticks;
}

TEST(ScreenTest, BarsAreTicksThenBlanks) {
  const Fixture f;
  TopView v = f.Build();
  std::vector<CoreCell>& cores = v.apps[0].grid[0].cores;
  ASSERT_EQ(cores.size(), 2u);
  for (const auto& [core0, core1] : {std::pair{0.0, 1.0}, {0.5, 0.25}, {1.0, 0.0}}) {
    cores[0].utilization = core0;
    cores[1].utilization = core1;
    for (const int w : {80, 140, 223}) {
      SCOPED_TRACE(::testing::Message() << core0 << "/" << core1 << " at " << w << " columns");
      const UiState ui;
      const Layout l = ComputeLayout(RequestFor(&v, ui, w, 44));
      const Canvas c = Paint(&v, ui, l, "9.9");
      const GridGeometry& g = l.grid_geometry;
      ASSERT_GE(g.cells_per_line, 2);
      const int y = l.grid.y + 2;  // ND0's line
      for (int j = 0; j < 2; ++j) {
        const double u = *cores[static_cast<size_t>(j)].utilization;
        const int bar_w =
            g.cell_width - 1 - static_cast<int>(FormatPercent(u).size()) - 2;  // "[" "]"
        ASSERT_GT(bar_w, 0);
        const int x = l.grid.x + g.label_width + j * g.cell_width;
        EXPECT_EQ(BarTicks(c, y, x, bar_w, Style::kBarFill, Style::kBarEmpty),
                  static_cast<int>(std::lround(u * bar_w)))
            << c.Line(y);
      }
      // vCPU: user ticks then system ticks, blanks after them up to the value.
      const int vy = l.vcpu.y + 1;
      const std::string line = c.Line(vy);
      const int label = static_cast<int>(std::string_view("System vCPU Usage  ").size());
      const int bar_x = l.vcpu.x + label;
      const int value_x = static_cast<int>(line.find('[', static_cast<size_t>(bar_x)));
      ASSERT_GT(value_x, l.vcpu.x + label) << line;
      const int bar_w = value_x - 1 - (l.vcpu.x + label);
      const int user = static_cast<int>(std::lround(0.10 * bar_w));
      const int sys = static_cast<int>(std::lround(0.05 * bar_w));
      EXPECT_EQ(BarTicks(c, vy, l.vcpu.x + label, user, Style::kBarFill, Style::kBarFill), user)
          << line;
      EXPECT_EQ(
          BarTicks(c, vy, l.vcpu.x + label + user, bar_w - user, Style::kSystemBar, Style::kNormal),
          sys)
          << line;
    }
  }
}

TEST(ScreenTest, KeysSwitchTabsFlopsAndTree) {
  const Fixture f;
  const TopView v = f.Build();
  UiState ui;
  EXPECT_TRUE(HandleKey(ui, 'f', &v));
  EXPECT_THAT(Frame(v, ui), HasSubstr("NeuronCore v2 TFLOPs (Total: 4.00TF)"));
  EXPECT_THAT(Frame(v, ui), HasSubstr("[2.00TF]"));
  HandleKey(ui, 'f', &v);

  EXPECT_TRUE(HandleKey(ui, 'd', &v));  // next tab
  EXPECT_EQ(ui.tab_pid, kPid);
  std::string text = Frame(v, ui);
  EXPECT_THAT(text, HasSubstr(">[2]:bert-infer<"));
  EXPECT_THAT(text, HasSubstr("NeuronCore v2 Utilization (Avg: 25.00%)"));
  HandleKey(ui, '1', &v);
  EXPECT_FALSE(ui.tab_pid.has_value());

  // Enter opens the selected node (ND 0), then down + enter opens NC 0.
  HandleKey(ui, kKeyEnter, &v);
  text = Frame(v, ui);
  EXPECT_THAT(text, HasSubstr("[-] ND 0"));
  EXPECT_THAT(text, HasSubstr("[+] NC 0"));
  EXPECT_FALSE(WantsDetail(ui, v));
  HandleKey(ui, kKeyDown, &v);
  HandleKey(ui, kKeyDown, &v);
  HandleKey(ui, kKeyEnter, &v);  // NC 1
  text = Frame(v, ui);
  EXPECT_THAT(text, HasSubstr("[-] NC 1"));
  EXPECT_THAT(text, HasSubstr("[+] bert_large_b16"));
  EXPECT_THAT(text, HasSubstr("10027"));
  EXPECT_THAT(text, HasSubstr("Model Scratchpad"));
  EXPECT_TRUE(WantsDetail(ui, v));  // per-core categories on "all" need the full sweep
  // x collapses everything, x again expands everything.
  HandleKey(ui, 'x', &v);
  EXPECT_THAT(Frame(v, ui), HasSubstr("[+] ND 0"));
  HandleKey(ui, 'x', &v);
  text = Frame(v, ui);
  EXPECT_THAT(text, HasSubstr("[-] bert_large_b16"));
  EXPECT_THAT(text, HasSubstr("[-] NC 0"));
  EXPECT_TRUE(HandleKey(ui, 'q', &v));
  EXPECT_TRUE(ui.quit);
}

TEST(ScreenTest, ProcessTableSorts) {
  TopView v;
  for (int i = 0; i < 3; ++i) {
    ProcessRow r;
    r.pid = 100 + i;
    r.utilization = i == 1 ? std::optional<double>() : std::optional<double>(0.1 * (i + 1));
    r.device_bytes = static_cast<uint64_t>(1000 * (3 - i));
    v.processes.push_back(r);
  }
  auto pids = [&](SortKey k, bool desc) {
    std::vector<int> out;
    for (const ProcessRow* r : SortedProcesses(v, k, desc)) out.push_back(r->pid);
    return out;
  };
  EXPECT_EQ(pids(SortKey::kUtilization, true), (std::vector<int>{102, 100, 101}));  // N/A last
  EXPECT_EQ(pids(SortKey::kUtilization, false), (std::vector<int>{100, 102, 101}));
  EXPECT_EQ(pids(SortKey::kDeviceMemory, true), (std::vector<int>{100, 101, 102}));
  EXPECT_EQ(pids(SortKey::kPid, false), (std::vector<int>{100, 101, 102}));
  UiState ui;
  HandleKey(ui, 's', &v);
  EXPECT_EQ(ui.sort, SortKey::kPid);
  HandleKey(ui, 'r', &v);
  EXPECT_FALSE(ui.descending);
}

}  // namespace
}  // namespace neuron::top
