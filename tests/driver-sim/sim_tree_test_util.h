#pragma once
// What sim_tree_test.cc and sim_tree_device_test.cc share: reading files of a tree and a created
// tree of one instance type in a temporary root. Split so each test file stays under 600 lines.

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "core/model/catalog.h"
#include "driver-sim/driver/node_info.h"
#include "driver-sim/driver/sim_tree.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace neuron::sim::sim_tree_test {

namespace fs = std::filesystem;

inline std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return "<missing " + p.string() + ">";
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline mode_t Mode(const fs::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

using TempRoot = ::neuron::testing::TempDir;

inline const InstanceSpec* Spec(std::string_view name) {
  absl::StatusOr<const InstanceSpec*> spec = FindInstance(name);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : nullptr;
}

// A created tree of one instance type in a temporary root. Driver 2.24's, whose facts
// docs/driver-interface.md#sysfs-tree states and these tests check; later generations:
// sim_generations_test.cc.
class Node {
 public:
  explicit Node(std::string_view type, int lnc = 1, std::string instance_id = "i-0123456789abcdef0")
      : tree_(
            RootPaths(root_.path()),
            NodeConfig{Spec(type), lnc, std::move(instance_id), "", {}, *ParseSimDriver("2.24")}) {
    absl::Status s = tree_.Create();
    EXPECT_TRUE(s.ok()) << s;
  }
  SimTree& tree() { return tree_; }
  const fs::path& root() const { return root_.path(); }
  fs::path dev(int d) const {
    return root() / "sys/devices/virtual/neuron_device" / ("neuron" + std::to_string(d));
  }

 private:
  TempRoot root_;
  SimTree tree_;
};

// Regular files below a device directory, without the generic dev and uevent
// (docs/driver-interface.md#sysfs-tree).
inline int CountDeviceFiles(const fs::path& dir) {
  int n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_symlink() || !e.is_regular_file()) continue;
    if (e.path().parent_path() == dir &&
        (e.path().filename() == "dev" || e.path().filename() == "uevent")) {
      continue;
    }
    ++n;
  }
  return n;
}

}  // namespace neuron::sim::sim_tree_test
