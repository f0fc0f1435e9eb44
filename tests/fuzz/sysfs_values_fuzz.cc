// Fuzz target: every parser of a sysfs, procfs or sim file value
// (docs/driver-interface.md#sysfs-tree to #counter-semantics): the first input byte picks the
// parser, the rest is the file's bytes. Beyond "no crash", a value that parses must print back to
// text that parses to the same value.
#include <cstdint>
#include <string>
#include <string_view>

#include "core/base/file_io.h"
#include "core/proc/pod_identity.h"
#include "core/proc/procinfo.h"
#include "core/sample/internal/counter_files.h"
#include "driver-sim/driver/node_info.h"
#include "tests/fuzz/fuzz_check.h"

namespace cf = neuron::counter_files;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::filesystem::path path = "fuzz";
  switch (data[0] % 12) {
    case 0:
      if (auto v = cf::ParseCounter(text)) {
        FUZZ_CHECK(cf::ParseCounter(std::to_string(*v) + "\n") == v);
      }
      break;
    case 1:
      if (auto s = cf::ParseState(text)) {
        const int v = static_cast<int>(*s);
        FUZZ_CHECK(v >= 0 && v <= 2);
      }
      break;
    case 2:
      if (auto p = cf::ParsePower(text)) FUZZ_CHECK(!p->status.empty());
      break;
    case 3:
      if (auto s = cf::ParseNumberedState(text)) FUZZ_CHECK(text.find(s->second) != text.npos);
      break;
    case 4:
      if (auto r = cf::ParseRateGbps(text)) FUZZ_CHECK(*r >= 0);
      break;
    case 5:
      if (auto v = neuron::ParseU64(text, path); v.ok()) {
        FUZZ_CHECK(*neuron::ParseU64(std::to_string(*v) + "\n", path) == *v);
      }
      break;
    case 6:
      if (auto v = neuron::ParseI64(text, path); v.ok()) {
        FUZZ_CHECK(*neuron::ParseI64(std::to_string(*v) + "\n", path) == *v);
      }
      break;
    case 7:
      (void)neuron::ParseHex(text, path);
      break;
    case 8:
      if (auto cpus = neuron::ParseCpuList(text, path); cpus.ok()) {
        for (size_t i = 1; i < cpus->size(); ++i) FUZZ_CHECK((*cpus)[i - 1] < (*cpus)[i]);
      }
      break;
    case 9:
      (void)neuron::ParseIdList(text, path);
      break;
    case 10:
      if (auto info = neuron::ParseNodeInfo(text, "node.json"); info.ok()) {
        const std::string again = neuron::NodeInfoToJson(*info);
        FUZZ_CHECK(neuron::ParseNodeInfo(again, "again").ok());
      }
      break;
    default:
      (void)neuron::ParsePodFromCgroup(text);
      (void)neuron::ParseProcessStat(text, "stat");
      (void)neuron::ParseSystemCpuTimes(text, "stat");
  }
  return 0;
}
