#include "tests/support/process.h"

#include <gtest/gtest.h>

namespace neuron::testing {

pid_t Spawn(std::vector<std::string> args, const std::filesystem::path& out,
            const std::filesystem::path& err, const std::vector<std::string>& env) {
  std::string error;
  const pid_t pid = StartProcess(std::move(args), out, err, env, &error);
  EXPECT_GT(pid, 0) << error;
  return pid;
}

}  // namespace neuron::testing
