// `neuron-sim exec`: the command after "--" under the simulated driver (exec.h).

#include "driver-sim/driver/exec_command.h"

#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "core/driver/sysfs_names.h"
#include "driver-sim/driver/exec.h"

namespace neuron::sim {

Command AddExecCommand(CLI::App& app, CommandTail& tail) {
  auto root = std::make_shared<std::string>("/");
  CLI::App* exec = app.add_subcommand(
      "exec",
      "run CMD with the simulated driver's device node: ROOT/dev/neuronN (and /dev/neuronN for "
      "a pod's runtime) answer open, ioctl and mmap as the Neuron driver does");
  AddRootOption(exec, root.get());
  exec->footer("usage: neuron-sim exec --root DIR -- CMD [ARGS...]");
  tail.Accept("exec");
  return {exec, [root, &tail]() -> int {
            if (!tail.present() || tail.words().empty()) {
              return UsageError("exec", "nothing to run after --");
            }
            const RootPaths paths(std::filesystem::absolute(*root).lexically_normal());
            const absl::Status s = ExecUnderSimDriver(paths, tail.words());
            std::cerr << fmt::format("neuron-sim exec: {}\n", std::string{s.message()});
            return absl::IsNotFound(s) ? 127 : kExitFailure;
          }};
}

}  // namespace neuron::sim
