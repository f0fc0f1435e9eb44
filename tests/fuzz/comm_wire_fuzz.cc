// Fuzz target: the frames of a collective world's TCP connections
// (driver-sim/README.md#collective-wire), which rank 0's process reads from any process that
// connects to NEURON_RT_ROOT_COMM_ID. Every frame the decoders accept re-encodes to the same bytes,
// and a world's table fed the arrivals completes a group only when each member arrived at it once.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "driver-sim/runtime/comm_table.h"
#include "driver-sim/runtime/comm_wire.h"
#include "driver-sim/runtime/rendezvous.h"
#include "tests/fuzz/fuzz_check.h"

namespace wire = neuron::nrt::wire;
using neuron::nrt::Arrival;
using neuron::nrt::Decided;

namespace {

constexpr uint32_t kWorld = 64;

std::string_view Frame(const std::vector<uint8_t>& f) {
  return {reinterpret_cast<const char*>(f.data()) + 5, f.size() - 5};
}

// The arrivals the table has seen per group since it last decided that group.
using Seen = std::map<std::pair<uint64_t, uint32_t>, std::set<uint32_t>>;

void CheckTable(neuron::nrt::GroupTable& table, const Arrival& a, Seen* seen) {
  for (uint32_t m : a.members) {
    if (m >= kWorld) return;  // rank 0's process checks membership before the table
  }
  if (a.key != neuron::nrt::CommWorld::GroupKey(a.members)) return;  // refused likewise
  std::vector<Decided> decided;
  (*seen)[{a.key, a.seq}].insert(a.rank);
  table.Arrive(a, &decided);
  for (const Decided& d : decided) {
    FUZZ_CHECK(d.outcome != nullptr);
    FUZZ_CHECK(d.outcome->members.size() == d.members.size());
    // Complete only when every member arrived at this collective, each once.
    if (d.outcome->complete) {
      const std::set<uint32_t>& got = (*seen)[{d.key, d.seq}];
      FUZZ_CHECK(std::set<uint32_t>(d.members.begin(), d.members.end()) == got);
      FUZZ_CHECK(got.size() == d.members.size());
      FUZZ_CHECK(!d.outcome->data || !d.outcome->data->empty());
    }
    seen->erase({d.key, d.seq});
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view buf(reinterpret_cast<const char*>(data), size);
  neuron::nrt::GroupTable table(kWorld);
  Seen seen;
  while (true) {
    size_t used = 0;
    std::string bad;
    const std::optional<wire::Frame> f = wire::NextFrame(buf, &used, &bad);
    if (!f) break;
    FUZZ_CHECK(used >= 5 && used <= buf.size());
    switch (f->type) {
      case wire::Type::kArrive: {
        Arrival a;
        int64_t timeout = 0;
        if (!wire::DecodeArrive(f->body, &a, &timeout)) break;
        FUZZ_CHECK(Frame(wire::EncodeArrive(a, timeout)) == f->body);
        CheckTable(table, a, &seen);
        break;
      }
      case wire::Type::kDone: {
        Decided d;
        if (wire::DecodeDone(f->body, &d)) FUZZ_CHECK(Frame(wire::EncodeDone(d)) == f->body);
        break;
      }
      case wire::Type::kHello: {
        wire::Hello h;
        std::string why;
        if (wire::DecodeHello(f->body, &h, &why)) {
          FUZZ_CHECK(Frame(wire::EncodeHello(h)) == f->body);
        }
        break;
      }
      default:
        break;
    }
    buf.remove_prefix(used);
  }
  return 0;
}
