// Fuzz target: the frames of a collective world's TCP connections
// (driver-sim/README.md#collective-wire), which rank 0's process reads from any process that
// connects to NEURON_RT_ROOT_COMM_ID. Every frame the decoders accept re-encodes to the same bytes,
// and arrivals fed to a world's table never decide a group twice or make up members.
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "driver-sim/runtime/comm_table.h"
#include "driver-sim/runtime/comm_wire.h"
#include "tests/fuzz/fuzz_check.h"

namespace wire = neuron::nrt::wire;
using neuron::nrt::Arrival;
using neuron::nrt::Decided;

namespace {

constexpr uint32_t kWorld = 64;

std::string_view Frame(const std::vector<uint8_t>& f) {
  return {reinterpret_cast<const char*>(f.data()) + 5, f.size() - 5};
}

void CheckTable(neuron::nrt::GroupTable& table, Arrival a,
                std::set<std::pair<uint64_t, uint32_t>>* seen) {
  for (uint32_t m : a.members) {
    if (m >= kWorld) return;  // rank 0's process checks membership before the table
  }
  std::vector<Decided> decided;
  const std::vector<uint32_t> members = a.members;
  table.Arrive(std::move(a), &decided);
  for (const Decided& d : decided) {
    FUZZ_CHECK(d.outcome != nullptr);
    FUZZ_CHECK(d.outcome->members.size() == d.members.size());
    // A complete group is decided once; a failed one may be told again to late members.
    if (d.outcome->complete) FUZZ_CHECK(seen->insert({d.key, d.seq}).second);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view buf(reinterpret_cast<const char*>(data), size);
  neuron::nrt::GroupTable table(kWorld);
  std::set<std::pair<uint64_t, uint32_t>> seen;
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
        CheckTable(table, std::move(a), &seen);
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
        if (wire::DecodeHello(f->body, &h, &why))
          FUZZ_CHECK(Frame(wire::EncodeHello(h)) == f->body);
        break;
      }
      default:
        break;
    }
    buf.remove_prefix(used);
  }
  return 0;
}
