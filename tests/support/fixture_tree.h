#pragma once
// Fixture trees: directories built from checked-in manifests (tests/fixtures/driver/), so that
// core is tested against the driver's interface as transcribed from the driver, not against what
// our own simulator writes. A manifest is text, one line per path pattern:
//
//   # a comment                      whole lines only
//   set NAME VALUE                   VALUE is the rest of the line ("" for an empty one)
//   range NAME FIRST[-LAST]          NAME takes each value FIRST..LAST in the lines that use it
//   include FILE                     FILE relative to this manifest's directory
//   under DIR                        later paths of this file are relative to DIR ("under ." =
//   root) PATH MODE CONTENT                a regular file PATH/ MODE                       a
//   directory (parents of any path are made 0755 anyway) PATH -> TARGET                   a
//   symbolic link to TARGET, kept as written
//
// Patterns: {NAME} is a variable; a line that uses a range variable is repeated for each of its
// values (all combinations when it uses several). {NAME:R} is the variable "NAME.<value of the
// range variable R>" when that is set, else NAME: per-device or per-core values. {A,B,C} in a
// PATH gives one line per alternative. MODE is octal (0644). CONTENT is either the rest of the
// line, to which a newline is added (`0` is "0\n", the common "%llu\n"), or a double-quoted
// string taken exactly, with the escapes \n \t \\ \" \xNN ("2" has no newline, "\n" is a lone
// newline). Variables are expanded in content and link targets too. A path given twice, an
// unknown variable or directive, a bad mode, escape or range each fail with the manifest's file
// and line.
//
// Thread-safe (no shared state).

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace neuron::testing {

struct FixtureEntry {
  enum class Kind { kFile, kDirectory, kSymlink };
  Kind kind = Kind::kFile;
  std::string path;     // relative to the tree's root, no "." or ".." components
  mode_t mode = 0;      // files and directories
  std::string content;  // a file's bytes; a symlink's target
  std::string origin;   // "<manifest>:<line>", for messages
};

// Reads `manifest` and what it includes, and expands every pattern, in manifest order.
absl::StatusOr<std::vector<FixtureEntry>> ExpandManifest(const std::filesystem::path& manifest);
// The same from text; `name` stands for the file in messages, includes resolve in `include_dir`.
absl::StatusOr<std::vector<FixtureEntry>> ExpandManifestText(
    std::string_view text, std::string_view name, const std::filesystem::path& include_dir);

// Creates the entries under `root` (made if missing). An entry that already exists fails.
absl::Status WriteFixtureTree(const std::vector<FixtureEntry>& entries,
                              const std::filesystem::path& root);
// ExpandManifest, then WriteFixtureTree.
absl::Status BuildFixtureTree(const std::filesystem::path& manifest,
                              const std::filesystem::path& root);

#ifdef NEURON_SOURCE_DIR
// A checked-in manifest of the driver's interface: "trn1.2xlarge.manifest".
inline std::filesystem::path DriverFixture(std::string_view file) {
  return std::filesystem::path(NEURON_SOURCE_DIR) / "tests/fixtures/driver" / file;
}
#endif

}  // namespace neuron::testing
