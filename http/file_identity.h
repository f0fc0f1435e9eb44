#pragma once
// What stat(2) says about a file, to notice that it changed without reading it: a rename over it
// (device, inode), a rewrite in place (size, mtime, ctime), or its disappearance. stat follows
// symlinks, so kubelet's swap of a secret volume's `..data` link counts as a change of every file
// under it. The TLS and web config reloaders share it (http/tls_context.h). Thread-safe.

#include <sys/stat.h>

#include <cstdint>
#include <string>

namespace neuron {

struct FileIdentity {
  bool exists = false;  // false when stat fails; the other fields are then zero
  uint64_t dev = 0;
  uint64_t ino = 0;
  int64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};

inline FileIdentity StatFile(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return FileIdentity{};
  constexpr int64_t kNs = 1000000000;
  return FileIdentity{
      .exists = true,
      .dev = static_cast<uint64_t>(st.st_dev),
      .ino = static_cast<uint64_t>(st.st_ino),
      .size = static_cast<int64_t>(st.st_size),
      .mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * kNs + st.st_mtim.tv_nsec,
      .ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * kNs + st.st_ctim.tv_nsec,
  };
}

}  // namespace neuron
