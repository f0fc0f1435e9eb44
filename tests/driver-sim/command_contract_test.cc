// docs/architecture.md#command-line-contracts against the real neuron-sim, as
// rules_dashboard_test holds monitor/README.md's metric list to what the exporter emits: the verbs
// the contracts name are exactly the verbs `neuron-sim --help` lists, every flag a contract line
// gives exists on its verb, and the ctl contract is exactly the ctl grammar (CtlUsage, which
// `neuron-sim ctl --help` prints from the daemon's table of verbs).

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace neuron::sim {
namespace {

namespace fs = std::filesystem;
using testing::ReadFile;
using testing::RunCommand;
using testing::TempDir;

// One contract of the architecture page: its first line and its continuation lines joined by a
// space, "# ..." remarks dropped.
struct Contract {
  std::string text;
  bool implemented = true;  // false: in the "not yet implemented" block
};

std::string StripRemark(const std::string& line) {
  const size_t hash = line.find(" #");
  std::string s = hash == std::string::npos ? line : line.substr(0, hash);
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// The neuron-sim contracts of the "Command-line contracts" section's code blocks.
std::vector<Contract> NeuronSimContracts() {
  const std::string doc = ReadFile(fs::path(NEURON_SOURCE_DIR) / "docs/architecture.md");
  const size_t begin = doc.find("\n## Command-line contracts");
  const size_t end = doc.find("\n## ", begin + 1);
  EXPECT_NE(begin, std::string::npos) << "docs/architecture.md has no Command-line contracts";
  std::istringstream lines(doc.substr(begin, end - begin));
  std::vector<Contract> out;
  bool in_block = false, implemented = true, in_sim = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("```")) {
      in_block = !in_block;
      in_sim = false;
      continue;
    }
    if (!in_block) {
      if (line.find("not yet implemented") != std::string::npos) implemented = false;
      continue;
    }
    const std::string text = StripRemark(line);
    if (text.starts_with("neuron-sim ")) {
      out.push_back({text, implemented});
      in_sim = true;
    } else if (!line.empty() && line[0] == ' ' && in_sim) {
      if (const size_t at = text.find_first_not_of(' '); at != std::string::npos) {
        out.back().text += " " + text.substr(at);
      }
    } else {
      in_sim = false;
    }
  }
  return out;
}

std::string Word(const std::string& text, size_t n) {
  std::istringstream in(text);
  std::string w;
  for (size_t i = 0; i <= n && (in >> w); ++i) {
  }
  return w;
}

// The subcommands a --help page lists, in order.
std::vector<std::string> HelpSubcommands(const std::string& help) {
  std::vector<std::string> verbs;
  std::istringstream lines(help);
  bool in_list = false;
  for (std::string line; std::getline(lines, line);) {
    if (line == "Subcommands:") {
      in_list = true;
    } else if (in_list && line.starts_with("  ") && line[2] != ' ') {
      verbs.push_back(Word(line, 0));
    } else if (in_list && line.empty()) {
      in_list = false;
    }
  }
  return verbs;
}

class CommandContractTest : public ::testing::Test {
 protected:
  // `neuron-sim ARGS... --help` on stdout; the test fails if it does not exit 0.
  std::string Help(std::vector<std::string> args) {
    args.insert(args.begin(), NEURON_SIM_BIN);
    args.emplace_back("--help");
    testing::RunResult r = RunCommand(dir_.path(), args);
    EXPECT_EQ(r.code, 0) << r.err;
    return r.out;
  }
  // The help of a verb and of each of its subcommands.
  std::string VerbHelp(const std::string& verb) {
    std::string text = Help({verb});
    for (const std::string& sub : HelpSubcommands(text)) text += Help({verb, sub});
    return text;
  }

  TempDir dir_{"command_contract"};
};

TEST_F(CommandContractTest, TheHelpListsExactlyTheVerbsTheContractsImplement) {
  const std::vector<Contract> contracts = NeuronSimContracts();
  ASSERT_GE(contracts.size(), 10u) << "the contracts did not parse";
  std::set<std::string> documented, planned;
  for (const Contract& c : contracts) {
    (c.implemented ? documented : planned).insert(Word(c.text, 1));
  }
  const std::vector<std::string> listed = HelpSubcommands(Help({}));
  const std::set<std::string> served(listed.begin(), listed.end());
  for (const std::string& verb : served) {
    EXPECT_TRUE(documented.count(verb))
        << "neuron-sim " << verb << " is in --help but has no contract in docs/architecture.md"
        << (planned.count(verb) ? " (it is listed as not yet implemented)" : "");
  }
  for (const std::string& verb : documented) {
    EXPECT_TRUE(served.count(verb)) << "docs/architecture.md's contract neuron-sim " << verb
                                    << " is not a verb of neuron-sim --help";
  }
}

// CLI11 lists a flag as "  --name TYPE" or, with aliases, "  --name,--alias TYPE": the flag
// is a whole name between two spaces or commas.
bool HelpListsFlag(const std::string& help, const std::string& flag) {
  for (const char* before : {"  ", ","}) {
    for (const char* after : {" ", ","}) {
      if (help.find(before + flag + after) != std::string::npos) return true;
    }
  }
  return false;
}

TEST_F(CommandContractTest, EveryFlagAContractGivesIsAFlagOfItsVerb) {
  std::map<std::string, std::string> help;  // verb -> its help and its subcommands'
  size_t flags = 0;
  for (const Contract& c : NeuronSimContracts()) {
    if (!c.implemented) continue;
    const std::string verb = Word(c.text, 1);
    if (!help.count(verb)) help[verb] = VerbHelp(verb);
    // ctl's words inside <...> are its grammar, held to CtlUsage below.
    std::istringstream words(verb == "ctl" ? c.text.substr(0, c.text.find('<')) : c.text);
    for (std::string w; words >> w;) {
      const size_t at = w.find("--");
      if (at == std::string::npos || w == "--") continue;
      size_t stop = w.find_first_not_of("-abcdefghijklmnopqrstuvwxyz0123456789.", at);
      const std::string flag = w.substr(at, stop == std::string::npos ? stop : stop - at);
      if (flag.size() <= 2) continue;  // "[-- CMD ...]"
      ++flags;
      EXPECT_TRUE(HelpListsFlag(help[verb], flag))
          << "docs/architecture.md gives neuron-sim " << verb << " " << flag
          << ", which its --help does not list";
    }
  }
  EXPECT_GE(flags, 40u) << "the contracts' flags did not parse";
}

// The ctl contract's alternatives, one grammar line each: "<a | b|c --x N | ...>", where a
// leading "b|c" names two verbs of one grammar.
std::set<std::string> ContractCtlGrammar() {
  std::set<std::string> lines;
  for (const Contract& c : NeuronSimContracts()) {
    if (Word(c.text, 1) != "ctl") continue;
    const size_t open = c.text.find('<');
    const size_t close = c.text.rfind('>');
    EXPECT_TRUE(open != std::string::npos && close > open) << c.text;
    std::string body = c.text.substr(open + 1, close - open - 1) + " |";
    for (size_t bar; (bar = body.find(" |")) != std::string::npos; body.erase(0, bar + 2)) {
      std::string alt = body.substr(0, bar);
      alt.erase(0, alt.find_first_not_of(' '));
      const size_t space = alt.find(' ');
      const std::string names = alt.substr(0, space);
      const std::string rest = space == std::string::npos ? "" : alt.substr(space);
      std::istringstream each(names);
      for (std::string name; std::getline(each, name, '|');) lines.insert(name + rest);
    }
  }
  return lines;
}

TEST_F(CommandContractTest, TheCtlContractIsTheCtlGrammar) {
  std::set<std::string> usage;
  std::istringstream lines(Help({"ctl"}));
  bool in_list = false;
  for (std::string line; std::getline(lines, line);) {
    if (line == "commands:") {
      in_list = true;
    } else if (in_list && line.starts_with("  ")) {
      usage.insert(line.substr(2));
    } else if (in_list) {
      break;
    }
  }
  ASSERT_GE(usage.size(), 10u) << "neuron-sim ctl --help has no commands: list";
  const std::set<std::string> contract = ContractCtlGrammar();
  for (const std::string& u : usage) {
    EXPECT_TRUE(contract.count(u)) << "ctl " << u << " is missing from docs/architecture.md";
  }
  for (const std::string& c : contract) {
    EXPECT_TRUE(usage.count(c)) << "docs/architecture.md gives ctl " << c
                                << ", which is not neuron-sim ctl's grammar";
  }
}

}  // namespace
}  // namespace neuron::sim
