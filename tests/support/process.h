#pragma once
// Running real binaries from tests: everything of tests/support/subprocess.h, plus the
// conveniences that fail the running test (GoogleTest) instead of returning an error.
// Thread-compatible.

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/subprocess.h"

namespace neuron::testing {

// StartProcess, failing the test when the program cannot be started. Returns -1 then.
pid_t Spawn(std::vector<std::string> args, const std::filesystem::path& out,
            const std::filesystem::path& err, const std::vector<std::string>& env = {});

}  // namespace neuron::testing
