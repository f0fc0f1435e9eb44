#include "core/datastore.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>

#include "core/component_log.h"

namespace neuron {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the datastore holds little-endian values; a big-endian host needs byte swaps");

spdlog::logger& Log() {
  static std::shared_ptr<spdlog::logger> log = ComponentLogger("datastore");
  return *log;
}

template <typename T>
T Load(std::span<const std::byte> bytes, size_t offset) {
  T v;
  std::memcpy(&v, bytes.data() + offset, sizeof(T));
  return v;
}

void LoadU64s(std::span<const std::byte> bytes, size_t offset, uint64_t* out, size_t n) {
  std::memcpy(out, bytes.data() + offset, n * sizeof(uint64_t));
}

// A NUL-terminated char[max] as text; bytes outside printable ASCII become '?', because tags end
// up in metric labels and terminal cells.
std::string LoadString(std::span<const std::byte> bytes, size_t offset, size_t max) {
  const char* p = reinterpret_cast<const char*>(bytes.data() + offset);
  size_t n = 0;
  while (n < max && p[n] != '\0') ++n;
  std::string s(p, n);
  for (char& c : s) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return s;
}

bool MagicIs(std::span<const std::byte> bytes, size_t offset, const char (&magic)[4]) {
  return std::memcmp(bytes.data() + offset, magic, 4) == 0;
}

NdsVersion LoadVersion(std::span<const std::byte> bytes, size_t offset) {
  return {Load<uint8_t>(bytes, offset), Load<uint8_t>(bytes, offset + 1),
          Load<uint32_t>(bytes, offset + 4)};
}

void LoadCoreCounters(std::span<const std::byte> bytes, DatastoreRecord* r) {
  for (int slot = 0; slot < nds::kMaxCores; ++slot) {
    uint64_t* out = r->core_counters[slot].data();
    if (slot < 4) {
      // Original section (indices 0-30), then the extended entries (31-94).
      LoadU64s(bytes, *nds::CoreCounterOffset(slot, 0), out, nds::kOriginalCoreCounters);
      LoadU64s(bytes, *nds::CoreCounterOffset(slot, nds::kOriginalCoreCounters),
               out + nds::kOriginalCoreCounters,
               nds::kCoreCounterCount - nds::kOriginalCoreCounters);
    } else {
      LoadU64s(bytes, *nds::CoreCounterOffset(slot, 0), out, nds::kCoreCounterCount);
    }
  }
}

void LoadObjectArea(std::span<const std::byte> bytes, std::string_view source, DatastoreRecord* r,
                    std::vector<std::string>* warnings) {
  if (!MagicIs(bytes, nds::kObjectHeaderOffset, nds::kObjectMagic)) return;
  const uint32_t version = Load<uint32_t>(bytes, nds::kObjectHeaderOffset + 4);
  if (version != 1) {
    warnings->push_back(
        fmt::format("{}: object area version {} is not understood (expected 1)", source, version));
    return;
  }
  const size_t pi = nds::kProcessInfoOffset;
  DatastoreProcessInfo info;
  info.framework_type = Load<int8_t>(bytes, pi + nds::kPiFrameworkType);
  info.tag = LoadString(bytes, pi + nds::kPiTag, nds::kPiTagSize);
  info.framework_version = LoadVersion(bytes, pi + nds::kPiFrameworkVersion);
  info.fal_version = LoadVersion(bytes, pi + nds::kPiFalVersion);
  info.runtime_version = LoadVersion(bytes, pi + nds::kPiRuntimeVersion);
  info.long_tag = LoadString(bytes, nds::kProcessTagOffset, nds::kProcessTagSize);
  r->process = std::move(info);

  const uint32_t count = Load<uint32_t>(bytes, nds::kModelCountOffset);
  if (count > static_cast<uint32_t>(nds::kMaxModelRecords)) {
    warnings->push_back(fmt::format("{}: model record count {} exceeds the maximum {}", source,
                                    count, nds::kMaxModelRecords));
    return;
  }
  r->models.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    const size_t at = nds::kModelRecordsOffset + i * nds::kModelRecordSize;
    DatastoreModel m;
    m.model_id = Load<uint32_t>(bytes, at);
    m.model_node_id = Load<uint32_t>(bytes, at + 4);
    m.name = LoadString(bytes, at + 8, 256);
    std::memcpy(m.uuid.data(), bytes.data() + at + 264, m.uuid.size());
    m.nc_index = Load<uint8_t>(bytes, at + 280);
    m.sg_index = Load<uint8_t>(bytes, at + 281);
    const size_t mem = at + nds::kModelNodeInfoSize;
    for (size_t loc = 0; loc < 2; ++loc) {
      for (size_t slot = 0; slot < 12; ++slot) {
        const size_t e = mem + (loc * 12 + slot) * 16;
        m.memory[loc][slot] = {Load<uint64_t>(bytes, e), Load<uint32_t>(bytes, e + 8)};
      }
    }
    r->models.push_back(std::move(m));
  }
}

void LoadHistogram(std::span<const std::byte> bytes, std::string_view source, DatastoreRecord* r,
                   std::vector<std::string>* warnings) {
  if (!MagicIs(bytes, nds::kHistogramOffset, nds::kHistogramMagic)) return;
  const uint32_t n = Load<uint32_t>(bytes, nds::kHistogramOffset + 4);
  if (n == 0 || n > static_cast<uint32_t>(nds::kHistogramBuckets)) {
    warnings->push_back(fmt::format("{}: histogram bucket count {} outside 1..{}", source, n,
                                    nds::kHistogramBuckets));
    return;
  }
  LatencyHistogram h;
  h.num_buckets = static_cast<int>(n);
  LoadU64s(bytes, nds::kHistogramBoundsOffset, h.bounds_us.data(), n);
  const bool ascending = std::is_sorted(h.bounds_us.begin(), h.bounds_us.begin() + n,
                                        [](uint64_t a, uint64_t b) { return a <= b; });
  if (!ascending || h.bounds_us[n - 1] != UINT64_MAX) {
    warnings->push_back(fmt::format(
        "{}: histogram bounds are not ascending with +Inf last; histogram ignored", source));
    return;
  }
  for (int c = 0; c < nds::kMaxCores; ++c) {
    LoadU64s(bytes, nds::HistogramCountOffset(c, 0), h.counts[c].data(), n);
  }
  r->histogram = h;
}

// "<device>.<pid>", both decimal, nothing else.
bool ParseName(std::string_view name, DatastoreKey* key) {
  const size_t dot = name.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 == name.size()) return false;
  const char* end = name.data() + name.size();
  auto [p1, e1] = std::from_chars(name.data(), name.data() + dot, key->device);
  auto [p2, e2] = std::from_chars(name.data() + dot + 1, end, key->pid);
  return e1 == std::errc() && p1 == name.data() + dot && e2 == std::errc() && p2 == end &&
         key->device >= 0 && key->pid > 0;
}

class FileDatastoreReader final : public DatastoreReader {
 public:
  explicit FileDatastoreReader(const RootPaths& root) : dir_(root.DatastoreDir().string()) {}
  ~FileDatastoreReader() override {
    for (auto& [key, m] : maps_) ::munmap(const_cast<std::byte*>(m.addr), nds::kSize);
  }

  std::vector<DatastoreKey> List() override {
    std::vector<DatastoreKey> keys;
    ListNames(&keys, nullptr, nullptr);
    return keys;
  }

  DatastoreScan ReadAll() override {
    DatastoreScan scan;
    std::vector<DatastoreKey> keys;
    std::vector<std::string> names;
    const int dir_fd = ListNames(&keys, &names, &scan.errors);
    std::map<DatastoreKey, Mapping> still;
    for (size_t i = 0; i < keys.size(); ++i) {
      const std::string path = dir_ + "/" + names[i];
      absl::StatusOr<Mapping> m = MapEntry(dir_fd, names[i], path, keys[i]);
      if (!m.ok()) {
        scan.errors.push_back(std::string(m.status().message()));
        continue;
      }
      absl::StatusOr<DatastoreRecord> rec =
          ParseDatastore({m->addr, nds::kSize}, keys[i].device, keys[i].pid, path, &scan.errors);
      still.emplace(keys[i], *m);
      if (!rec.ok()) {
        scan.errors.push_back(std::string(rec.status().message()));
        continue;
      }
      scan.records.push_back(*std::move(rec));
    }
    if (dir_fd >= 0) ::close(dir_fd);
    // Entries that disappeared (process exit) are unmapped; the rest stay mapped.
    for (auto& [key, m] : maps_) {
      if (!still.contains(key)) ::munmap(const_cast<std::byte*>(m.addr), nds::kSize);
    }
    maps_ = std::move(still);
    return scan;
  }

  std::string_view name() const override { return "file"; }

 private:
  struct Mapping {
    dev_t dev = 0;
    ino_t ino = 0;
    const std::byte* addr = nullptr;
  };

  // Fills keys (sorted) and, when asked, the matching names. Returns the open directory fd (for
  // *at calls) when names are wanted, else -1. A missing directory is no entries.
  int ListNames(std::vector<DatastoreKey>* keys, std::vector<std::string>* names,
                std::vector<std::string>* errors) {
    const int fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
      if (errno != ENOENT && errors != nullptr) {
        errors->push_back(fmt::format("open {}: {}", dir_, std::strerror(errno)));
      }
      return -1;
    }
    const int dup_fd = names != nullptr ? ::dup(fd) : -1;
    DIR* d = ::fdopendir(fd);
    if (d == nullptr) {
      ::close(fd);
      if (dup_fd >= 0) ::close(dup_fd);
      return -1;
    }
    std::vector<std::pair<DatastoreKey, std::string>> found;
    while (const dirent* e = ::readdir(d)) {
      const std::string_view n = e->d_name;
      if (n.empty() || n[0] == '.') continue;  // ".", "..", the writer's temporary files
      DatastoreKey key;
      if (!ParseName(n, &key)) {
        if (errors != nullptr) {
          errors->push_back(
              fmt::format("{}/{}: not a datastore name (expected <device>.<pid>)", dir_, n));
        }
        continue;
      }
      found.emplace_back(key, std::string(n));
    }
    ::closedir(d);
    std::sort(found.begin(), found.end());
    for (auto& [key, n] : found) {
      keys->push_back(key);
      if (names != nullptr) names->push_back(std::move(n));
    }
    return dup_fd;
  }

  // The mapping of `name`, reused while the file is the same inode with the right size; a
  // replaced file is mapped afresh. stat() is fine here: these are regular files (D6), unlike
  // sysfs attributes whose sizes lie. The size check before every read guards against SIGBUS
  // on a file cut short; a writer truncating a file while we copy it is not guarded (the
  // simulator never truncates; it creates files whole and renames them into place).
  absl::StatusOr<Mapping> MapEntry(int dir_fd, const std::string& name, const std::string& path,
                                   DatastoreKey key) {
    struct stat st;
    if (::fstatat(dir_fd, name.c_str(), &st, 0) != 0) {
      return absl::UnavailableError(fmt::format("stat {}: {}", path, std::strerror(errno)));
    }
    if (auto it = maps_.find(key); it != maps_.end()) {
      if (it->second.dev == st.st_dev && it->second.ino == st.st_ino &&
          static_cast<size_t>(st.st_size) == nds::kSize) {
        return it->second;
      }
      ::munmap(const_cast<std::byte*>(it->second.addr), nds::kSize);
      maps_.erase(it);
    }
    const int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
      return absl::UnavailableError(fmt::format("open {}: {}", path, std::strerror(errno)));
    }
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return absl::DataLossError(fmt::format("{}: not a regular file", path));
    }
    if (static_cast<size_t>(st.st_size) != nds::kSize) {
      ::close(fd);
      return absl::DataLossError(
          fmt::format("{}: size {} bytes, expected {} (truncated or not a "
                      "datastore)",
                      path, st.st_size, nds::kSize));
    }
    void* addr = ::mmap(nullptr, nds::kSize, PROT_READ, MAP_SHARED, fd, 0);
    const int err = errno;
    ::close(fd);
    if (addr == MAP_FAILED) {
      return absl::UnavailableError(fmt::format("mmap {}: {}", path, std::strerror(err)));
    }
    Log().debug("mapped {}", path);
    return Mapping{st.st_dev, st.st_ino, static_cast<const std::byte*>(addr)};
  }

  std::string dir_;
  std::map<DatastoreKey, Mapping> maps_;
};

}  // namespace

NdsVersion UnpackVersionWord(uint64_t word) {
  return {static_cast<uint8_t>((word >> 40) & 0xff), static_cast<uint8_t>((word >> 32) & 0xff),
          static_cast<uint32_t>(word & 0xffffffffu)};
}

std::string DatastoreRecord::Tag() const {
  if (process && !process->long_tag.empty()) return process->long_tag;
  if (process && !process->tag.empty()) return process->tag;
  return std::to_string(pid);
}

absl::StatusOr<DatastoreRecord> ParseDatastore(std::span<const std::byte> bytes, int device,
                                               int pid, std::string_view source,
                                               std::vector<std::string>* warnings) {
  if (bytes.size() != nds::kSize) {
    return absl::DataLossError(
        fmt::format("{}: size {} bytes, expected {}", source, bytes.size(), nds::kSize));
  }
  if (!MagicIs(bytes, 0, nds::kMagic)) {
    return absl::DataLossError(fmt::format("{}: bad magic (expected \"nds\\0\")", source));
  }
  DatastoreRecord r;
  r.device = device;
  r.pid = pid;
  r.source = std::string(source);
  r.format_version = Load<int32_t>(bytes, 4);
  LoadU64s(bytes, nds::kDeviceCountersOffset, r.device_counters.data(), nds::kDeviceCounterCount);
  LoadCoreCounters(bytes, &r);
  LoadObjectArea(bytes, source, &r, warnings);
  LoadHistogram(bytes, source, &r, warnings);
  return r;
}

std::unique_ptr<DatastoreReader> MakeFileDatastoreReader(const RootPaths& root) {
  return std::make_unique<FileDatastoreReader>(root);
}

}  // namespace neuron
