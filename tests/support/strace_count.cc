#include "tests/support/strace_count.h"

#include <sstream>

#include "tests/support/subprocess.h"

namespace neuron::testing {

std::vector<std::string> UnderStrace(const std::filesystem::path& summary,
                                     const std::vector<std::string>& args) {
  std::vector<std::string> out{"strace", "-f", "-c", "-o", summary.string(), "--"};
  out.insert(out.end(), args.begin(), args.end());
  return out;
}

std::optional<int64_t> StraceTotalCalls(const std::filesystem::path& summary) {
  // "100.00    0.151751           9     16285       265 total": calls is the fourth column
  // (errors, the fifth, is blank when there were none).
  std::istringstream in(ReadFile(summary));
  std::string line;
  while (std::getline(in, line)) {
    if (!line.ends_with(" total")) continue;
    std::istringstream row(line);
    std::string percent, seconds, usecs;
    int64_t calls = 0;
    if (row >> percent >> seconds >> usecs >> calls) return calls;
  }
  return std::nullopt;
}

bool StraceDenied(const std::string& strace_err) {
  return strace_err.find("Operation not permitted") != std::string::npos;
}

AttachedCount CountAttached(const std::filesystem::path& work, int pid, int seconds) {
  AttachedCount out;
  out.summary = work / "attached.strace";
  const RunResult r =
      RunCommand(work, {"timeout", "-s", "INT", std::to_string(seconds), "strace", "-f", "-c", "-o",
                        out.summary.string(), "-p", std::to_string(pid)});
  out.strace_err = r.err;
  if (const std::optional<int64_t> calls = StraceTotalCalls(out.summary)) {
    out.per_second = *calls / seconds;
  }
  return out;
}

}  // namespace neuron::testing
