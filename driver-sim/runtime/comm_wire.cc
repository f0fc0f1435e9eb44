#include "driver-sim/runtime/comm_wire.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>

#include <charconv>
#include <cstring>
#include <memory>

namespace neuron::nrt::wire {
namespace {

// The most members or missing ranks a frame may list (a world's size bounds both).
constexpr uint32_t kMaxRanks = 1u << 20;

class Writer {
 public:
  explicit Writer(Type type) {
    out_.resize(4);
    U8(static_cast<uint8_t>(type));
  }
  template <typename T>
  void Put(T v) {
    const size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &v, sizeof(T));
  }
  void U8(uint8_t v) { Put(v); }
  void Bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  void Str(std::string_view s) {
    Put(static_cast<uint32_t>(s.size()));
    Bytes(s.data(), s.size());
  }
  void Ranks(const std::vector<uint32_t>& r) {
    Put(static_cast<uint32_t>(r.size()));
    Bytes(r.data(), r.size() * sizeof(uint32_t));
  }
  std::vector<uint8_t> Finish() {
    const auto len = static_cast<uint32_t>(out_.size() - 4);
    std::memcpy(out_.data(), &len, 4);
    return std::move(out_);
  }

 private:
  std::vector<uint8_t> out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <typename T>
  bool Get(T* v) {
    if (in_.size() < sizeof(T)) return false;
    std::memcpy(v, in_.data(), sizeof(T));
    in_.remove_prefix(sizeof(T));
    return true;
  }
  bool Str(std::string* s) {
    uint32_t n = 0;
    if (!Get(&n) || n > in_.size()) return false;
    s->assign(in_.data(), n);
    in_.remove_prefix(n);
    return true;
  }
  bool Ranks(std::vector<uint32_t>* r) {
    uint32_t n = 0;
    if (!Get(&n) || n > kMaxRanks || size_t{n} * 4 > in_.size()) return false;
    r->resize(n);
    if (n > 0) std::memcpy(r->data(), in_.data(), size_t{n} * 4);
    in_.remove_prefix(size_t{n} * 4);
    return true;
  }
  bool Data(std::vector<uint8_t>* d) {
    uint64_t n = 0;
    if (!Get(&n) || n > in_.size()) return false;
    d->assign(in_.begin(), in_.begin() + static_cast<ptrdiff_t>(n));
    in_.remove_prefix(n);
    return true;
  }
  bool done() const { return in_.empty(); }

 private:
  std::string_view in_;
};

}  // namespace

absl::StatusOr<sockaddr_in> ResolveCommId(const std::string& comm_id) {
  const size_t colon = comm_id.rfind(':');
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        fmt::format("NEURON_RT_ROOT_COMM_ID \"{}\" {}: expected host:port", comm_id, why));
  };
  if (colon == std::string::npos || colon == 0) return bad("has no host");
  const std::string host = comm_id.substr(0, colon);
  const std::string port_text = comm_id.substr(colon + 1);
  int port = 0;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port < 1 || port > 65535) {
    return bad("has no port from 1 to 65535");
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) == 1) return addr;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) {
    return bad("names a host that does not resolve to an IPv4 address");
  }
  addr.sin_addr = reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr;
  ::freeaddrinfo(found);
  return addr;
}

std::vector<uint8_t> EncodeHello(const Hello& h) {
  Writer w(Type::kHello);
  w.Put(kMagic);
  w.Put(kVersion);
  w.Put(h.world);
  w.Put(h.pid);
  w.Str(h.node);
  return w.Finish();
}

std::vector<uint8_t> EncodeEmpty(Type type) { return Writer(type).Finish(); }

std::vector<uint8_t> EncodeError(std::string_view message) {
  Writer w(Type::kError);
  w.Str(message);
  return w.Finish();
}

std::vector<uint8_t> EncodeRank(Type type, uint32_t rank, int32_t device) {
  Writer w(type);
  w.Put(rank);
  w.Put(device);
  return w.Finish();
}

std::vector<uint8_t> EncodeRefuse(uint32_t rank, std::string_view why) {
  Writer w(Type::kRefuse);
  w.Put(rank);
  w.Str(why);
  return w.Finish();
}

std::vector<uint8_t> EncodeArrive(const Arrival& a, int64_t timeout_ns) {
  Writer w(Type::kArrive);
  w.Put(a.rank);
  w.Put(a.key);
  w.Put(a.seq);
  w.Put(a.arrive_ns);
  w.Put(timeout_ns);
  w.U8(static_cast<uint8_t>(a.combine));
  w.Put(static_cast<int32_t>(a.dtype));
  w.Ranks(a.members);
  w.Put(static_cast<uint64_t>(a.data.size()));
  w.Bytes(a.data.data(), a.data.size());
  return w.Finish();
}

std::vector<uint8_t> EncodeDone(const Decided& d) {
  const Outcome& o = *d.outcome;
  Writer w(Type::kDone);
  w.Put(d.key);
  w.Put(d.seq);
  w.U8((o.complete ? 1 : 0) | (o.timed_out ? 2 : 0));
  w.Put(o.start_ns);
  w.Ranks(d.members);
  for (const MemberInfo& m : o.members) {
    w.Put(m.node);
    w.Put(m.device);
  }
  w.Ranks(o.missing);
  w.Str(o.why);
  const size_t n = o.data ? o.data->size() : 0;
  w.Put(static_cast<uint64_t>(n));
  if (n > 0) w.Bytes(o.data->data(), n);
  return w.Finish();
}

std::optional<Frame> NextFrame(std::string_view buf, size_t* used, std::string* bad) {
  uint32_t len = 0;
  if (buf.size() < 4) return std::nullopt;
  std::memcpy(&len, buf.data(), 4);
  if (len < 1 || len > kMaxFrameBytes) {
    *bad = fmt::format("frame of {} bytes (1 to {} expected)", len, kMaxFrameBytes);
    return std::nullopt;
  }
  if (buf.size() - 4 < len) return std::nullopt;
  *used = 4 + size_t{len};
  return Frame{static_cast<Type>(static_cast<uint8_t>(buf[4])), buf.substr(5, len - 1)};
}

bool DecodeHello(std::string_view body, Hello* h, std::string* bad) {
  Reader r(body);
  uint32_t magic = 0;
  uint32_t version = 0;
  if (!r.Get(&magic) || magic != kMagic || !r.Get(&version)) {
    *bad = "not a collective world's hello";
    return false;
  }
  if (version != kVersion) {
    *bad = fmt::format("protocol version {} (this runtime speaks {})", version, kVersion);
    return false;
  }
  if (!r.Get(&h->world) || !r.Get(&h->pid) || !r.Str(&h->node) || !r.done()) {
    *bad = "truncated hello";
    return false;
  }
  return true;
}

bool DecodeRank(std::string_view body, uint32_t* rank, int32_t* device) {
  Reader r(body);
  return r.Get(rank) && r.Get(device) && r.done();
}

bool DecodeRefuse(std::string_view body, uint32_t* rank, std::string* why) {
  Reader r(body);
  return r.Get(rank) && r.Str(why) && r.done();
}

bool DecodeArrive(std::string_view body, Arrival* a, int64_t* timeout_ns) {
  Reader r(body);
  uint8_t combine = 0;
  int32_t dtype = 0;
  if (!r.Get(&a->rank) || !r.Get(&a->key) || !r.Get(&a->seq) || !r.Get(&a->arrive_ns) ||
      !r.Get(timeout_ns) || !r.Get(&combine) || !r.Get(&dtype) || !r.Ranks(&a->members) ||
      !r.Data(&a->data) || !r.done()) {
    return false;
  }
  if (combine > static_cast<uint8_t>(Combine::kGather)) return false;
  a->combine = static_cast<Combine>(combine);
  a->dtype = dtype;
  return true;
}

bool DecodeDone(std::string_view body, Decided* d) {
  Reader r(body);
  auto o = std::make_shared<Outcome>();
  uint8_t complete = 0;
  if (!r.Get(&d->key) || !r.Get(&d->seq) || !r.Get(&complete) || !r.Get(&o->start_ns) ||
      !r.Ranks(&d->members)) {
    return false;
  }
  o->members.resize(d->members.size());
  for (MemberInfo& m : o->members) {
    if (!r.Get(&m.node) || !r.Get(&m.device)) return false;
  }
  auto data = std::make_shared<std::vector<uint8_t>>();
  if (!r.Ranks(&o->missing) || !r.Str(&o->why) || !r.Data(data.get()) || !r.done() ||
      complete > 3) {
    return false;
  }
  o->complete = (complete & 1) != 0;
  o->timed_out = (complete & 2) != 0;
  if (!data->empty()) o->data = std::move(data);
  d->outcome = std::move(o);
  return true;
}

bool DecodeError(std::string_view body, std::string* message) {
  Reader r(body);
  return r.Str(message) && r.done();
}

}  // namespace neuron::nrt::wire
