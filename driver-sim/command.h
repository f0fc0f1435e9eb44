#pragma once
// How a `neuron-sim` verb is written (docs/architecture.md#command-line-contracts): each room
// registers its own verbs with one function, AddXCommand(CLI::App&), which adds the subcommand's
// options and returns what runs it once the command line is parsed; neuron_sim_main.cc only
// lists them. This header holds what several rooms' verbs share. Not thread-safe (command-line
// set-up, on the main thread).

#include <CLI/CLI.hpp>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace neuron::sim {

// A registered verb and what runs it: returns the exit code.
using Command = std::pair<CLI::App*, std::function<int()>>;

inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;  // docs/architecture.md#readiness-and-lifecycle

// `--root DIR` (NEURON_ROOT): the simulated node's filesystem.
void AddRootOption(CLI::App* cmd, std::string* root);

// Prints "neuron-sim COMMAND: MESSAGE" and the --help hint to stderr; returns kExitUsage.
int UsageError(std::string_view command, std::string_view message);

// The words after "--" of the verbs that pass them on verbatim (`ctl printk -- TEXT`,
// `exec -- CMD`, `pod run -- CMD`): CLI11 would take them as unexpected positionals, so main()
// takes them out of argv before parsing (Split) and the verb's runner reads them here.
class CommandTail {
 public:
  // The top-level verb `verb` takes a tail.
  void Accept(std::string verb) { verbs_.insert(std::move(verb)); }
  // When argv[1] is a verb that takes a tail and a "--" follows, moves the words after it here
  // and returns the argc that ends before the "--"; otherwise returns argc unchanged.
  int Split(int argc, char** argv);

  // A "--" was given (possibly with nothing after it).
  bool present() const { return present_; }
  const std::vector<std::string>& words() const { return words_; }

 private:
  std::set<std::string, std::less<>> verbs_;
  bool present_ = false;
  std::vector<std::string> words_;
};

}  // namespace neuron::sim
