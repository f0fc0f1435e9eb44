// `neuron-sim ctl`: the verb's words parsed by the daemon's own parser (ParseCtlArgs), sent over
// ctl.sock, the reply printed (ctl.h, driver-sim/README.md#ctl-protocol).

#include "driver-sim/driver/ctl_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "core/driver/sysfs_names.h"
#include "driver-sim/driver/ctl.h"

namespace neuron::sim {
namespace {

constexpr std::string_view kCtlUsageLine = "usage: neuron-sim ctl --root DIR COMMAND\n";

struct CtlFlags {
  std::string root = "/";
  int timeout_ms = 5000;
};

// The subcommand's one-line summary and its footer: the verbs from the daemon's table.
std::string CtlSummary() {
  std::vector<std::string_view> names;
  for (const CtlVerb& v : CtlVerbs()) names.push_back(v.name);
  return fmt::format("control a running simulated node: {}", fmt::join(names, ", "));
}
std::string CtlFooter() {
  std::string text = fmt::format("{}{}\n", kCtlUsageLine, CtlUsage());
  for (const CtlVerb& v : CtlVerbs()) text += fmt::format("  {:<12} {}\n", v.name, v.help);
  return text;
}

int RunCtl(const CtlFlags& f, std::vector<std::string> words, const CommandTail& tail) {
  if (tail.present()) {
    words.emplace_back("--");
    words.insert(words.end(), tail.words().begin(), tail.words().end());
  }
  absl::StatusOr<CtlRequest> req = ParseCtlArgs(words);
  if (!req.ok()) {
    std::cerr << fmt::format("neuron-sim ctl: {}\n{}{}", std::string{req.status().message()},
                             kCtlUsageLine, CtlUsage());
    return kExitUsage;
  }
  const RootPaths paths(std::filesystem::absolute(f.root).lexically_normal());
  absl::StatusOr<CtlReply> reply =
      SendCtlRequest(paths, *req, std::chrono::milliseconds(std::max(f.timeout_ms, 1)));
  if (!reply.ok()) {
    std::cerr << fmt::format("neuron-sim ctl: {}\n", std::string{reply.status().message()});
    return kExitFailure;
  }
  if (reply->outcome == CtlOutcome::kOk) {
    std::cout << reply->payload << std::flush;
  } else {
    std::cerr << fmt::format("neuron-sim ctl: {}\n{}", reply->message, reply->payload);
  }
  return CtlExitCode(reply->outcome);
}

}  // namespace

Command AddCtlCommand(CLI::App& app, CommandTail& tail) {
  auto f = std::make_shared<CtlFlags>();
  CLI::App* ctl = app.add_subcommand("ctl", CtlSummary());
  AddRootOption(ctl, &f->root);
  ctl->add_option("--timeout-ms", f->timeout_ms, "how long to wait for the daemon")->group("");
  // The verb's words are parsed by ParseCtlArgs, the same parser the daemon uses.
  ctl->allow_extras();
  ctl->footer(CtlFooter());
  tail.Accept("ctl");
  return {ctl, [f, ctl, &tail] { return RunCtl(*f, ctl->remaining(), tail); }};
}

}  // namespace neuron::sim
