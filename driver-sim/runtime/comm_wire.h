#pragma once
// The messages of a collective world's TCP connections (driver-sim/README.md#collective-wire):
// every frame is a little-endian u32 length of what follows, a u8 type and the type's fields.
// Encoding appends to a byte vector; decoding checks every length against the frame, so a
// malformed or hostile frame is an error, never an overrun. Thread-safe (pure functions).

#include <netinet/in.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "driver-sim/runtime/comm_table.h"

namespace neuron::nrt::wire {

inline constexpr uint32_t kMagic = 0x7763726e;  // "nrcw"
inline constexpr uint32_t kVersion = 1;
// The largest frame either side accepts: a 64-rank all-gather of 1 MiB each, with room to spare.
inline constexpr uint32_t kMaxFrameBytes = 256u << 20;

enum class Type : uint8_t {
  kHello = 1,    // client → rank 0: magic, version, world, pid, node name
  kWelcome = 2,  // rank 0 → client: the hello is accepted
  kError = 3,    // either way: a message, then the sender closes
  kJoin = 4,     // client → rank 0: rank, device
  kLeave = 5,    // client → rank 0: rank
  kArrive = 6,   // client → rank 0: an arrival (Arrival, the deadline as time left)
  kDone = 7,     // rank 0 → client: a group's outcome
  kRefuse = 8,   // rank 0 → client: a join refused (rank, why)
};

struct Hello {
  uint32_t world = 0;
  uint32_t pid = 0;
  std::string node;
};

struct Frame {
  Type type = Type::kError;
  std::string_view body;
};

// NEURON_RT_ROOT_COMM_ID (`host:port`, host an IPv4 address or a name that resolves to one) as a
// socket address. InvalidArgument naming the id when it is not one.
absl::StatusOr<sockaddr_in> ResolveCommId(const std::string& comm_id);

// Frame builders: each returns the whole frame, length included.
std::vector<uint8_t> EncodeHello(const Hello& h);
std::vector<uint8_t> EncodeEmpty(Type type);
std::vector<uint8_t> EncodeError(std::string_view message);
std::vector<uint8_t> EncodeRank(Type type, uint32_t rank, int32_t device = 0);
std::vector<uint8_t> EncodeRefuse(uint32_t rank, std::string_view why);
std::vector<uint8_t> EncodeArrive(const Arrival& a, int64_t timeout_ns);
std::vector<uint8_t> EncodeDone(const Decided& d);

// Splits the next frame off the front of `buf` (consumed bytes are counted in *used). nullopt
// when the frame is not all there yet; an error string in *bad when the length is out of range.
std::optional<Frame> NextFrame(std::string_view buf, size_t* used, std::string* bad);

// Decoders: false when the body does not hold what the type says.
bool DecodeHello(std::string_view body, Hello* h, std::string* bad);
bool DecodeRank(std::string_view body, uint32_t* rank, int32_t* device);
bool DecodeRefuse(std::string_view body, uint32_t* rank, std::string* why);
bool DecodeArrive(std::string_view body, Arrival* a, int64_t* timeout_ns);
bool DecodeDone(std::string_view body, Decided* d);
bool DecodeError(std::string_view body, std::string* message);

}  // namespace neuron::nrt::wire
