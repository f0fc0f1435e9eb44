#include "tests/support/sim_testing.h"

#include <gtest/gtest.h>

namespace neuron::testing {

std::unique_ptr<sim::SimTree> MakeSimTree(const std::filesystem::path& root,
                                          std::string_view instance,
                                          const SimTreeOptions& options) {
  absl::StatusOr<std::unique_ptr<sim::SimTree>> tree = BuildSimTree(root, instance, options);
  EXPECT_TRUE(tree.ok()) << instance << " under " << root << ": " << tree.status();
  return tree.ok() ? *std::move(tree) : nullptr;
}

void ExpectCleanExit(std::optional<int> exit_code, const std::string& log) {
  EXPECT_EQ(exit_code, 0) << "neuron-sim up did not stop cleanly:\n" << log;
}

}  // namespace neuron::testing
