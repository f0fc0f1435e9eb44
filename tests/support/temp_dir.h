#pragma once
// A temporary directory for one test, removed with everything in it when the object goes.
// Honours TMPDIR (tests/CMakeLists.txt points it at tmpfs, where simulated trees build fast).
// Not thread-safe; one owner.

#include <filesystem>
#include <string>

namespace neuron::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "neuron_test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace neuron::testing
