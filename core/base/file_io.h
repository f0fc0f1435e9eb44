#pragma once
// Reading and parsing sysfs-like attribute files. Thread-safe (no shared state).
//
// Files are read whole without stat(), because sysfs reports a size of 4096 for every attribute
// and the simulator replaces files by rename: open, read to EOF, close, every time.
// A missing file is NotFoundError (callers turn it into an absent field); every other failure,
// and every malformed value, is an error whose message names the file.

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace neuron {

// Files larger than this are rejected: no attribute of ours comes close (pe_cntrs is 256 bytes).
inline constexpr size_t kMaxAttributeBytes = size_t{64} * 1024;

absl::StatusOr<std::string> ReadAttribute(const std::filesystem::path& path);
// Same, relative to an open directory fd; `display` names the file in errors.
absl::StatusOr<std::string> ReadAttributeAt(int dir_fd, const char* relative,
                                            const std::filesystem::path& display);

// Strips one trailing newline (attributes end in "\n"; core_count has none).
std::string_view StripNewline(std::string_view text);

// "%llu\n": decimal digits only, no sign, no overflow. `path` names the file in errors.
absl::StatusOr<uint64_t> ParseU64(std::string_view text, const std::filesystem::path& path);
// "%d\n" with optional '-' (numa_node prints -1).
absl::StatusOr<int64_t> ParseI64(std::string_view text, const std::filesystem::path& path);
// "0x1d0f\n".
absl::StatusOr<uint32_t> ParseHex(std::string_view text, const std::filesystem::path& path);
// "0-31,64-95\n" to the listed CPUs, ascending.
absl::StatusOr<std::vector<int>> ParseCpuList(std::string_view text,
                                              const std::filesystem::path& path);
// connected_devices: "12, 3, 4, 1\n", or "\n" for none. Order is kept.
absl::StatusOr<std::vector<int>> ParseIdList(std::string_view text,
                                             const std::filesystem::path& path);

// Convenience: read then parse; NotFound passes through untouched.
absl::StatusOr<uint64_t> ReadU64(const std::filesystem::path& path);
absl::StatusOr<int64_t> ReadI64(const std::filesystem::path& path);
// Reads a text attribute with the trailing newline removed.
absl::StatusOr<std::string> ReadText(const std::filesystem::path& path);

// A whole file's bytes, binary, up to `max_bytes` (OutOfRange beyond): a program, its inputs
// and expected outputs. NotFound when it does not exist, an I/O status naming the path otherwise.
absl::StatusOr<std::string> ReadWholeFile(const std::filesystem::path& path,
                                          uint64_t max_bytes = uint64_t{1} << 30);

// Writes `content` to `path` by writing PATH.tmp and renaming it over `path`, so a reader sees the
// old file or the new one, never half of one. The status names the file that could not be written.
absl::Status ReplaceFile(const std::filesystem::path& path, std::string_view content);

// The entries of `dir` without "." and ".."; empty when it cannot be read (a device directory
// that vanished mid-scan is not an error to the callers, who rescan).
std::vector<std::string> ListDir(const std::filesystem::path& dir);

}  // namespace neuron
