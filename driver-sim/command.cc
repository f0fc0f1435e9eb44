#include "driver-sim/command.h"

#include <fmt/format.h>

#include <iostream>

namespace neuron::sim {

void AddRootOption(CLI::App* cmd, std::string* root) {
  cmd->add_option("--root", *root, "root of the simulated node's filesystem")
      ->envname("NEURON_ROOT");
}

int UsageError(std::string_view command, std::string_view message) {
  std::cerr << fmt::format("neuron-sim {}: {}\nRun with --help for more information.\n", command,
                           message);
  return kExitUsage;
}

int CommandTail::Split(int argc, char** argv) {
  if (argc < 2 || !verbs_.contains(std::string_view(argv[1]))) return argc;
  for (int i = 2; i < argc; ++i) {
    if (std::string_view(argv[i]) != "--") continue;
    present_ = true;
    words_.assign(argv + i + 1, argv + argc);
    return i;
  }
  return argc;
}

}  // namespace neuron::sim
