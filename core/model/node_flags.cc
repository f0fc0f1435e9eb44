#include "core/model/node_flags.h"

#include <fmt/format.h>

#include <cstdlib>

namespace neuron {

std::optional<std::string> RealGetEnv(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

absl::StatusOr<int> ParseLnc(std::string_view text, std::string_view source) {
  if (text == "1" || text == "2") return text[0] - '0';
  return absl::InvalidArgumentError(fmt::format("{}: '{}' is not 1 or 2", source, text));
}

absl::StatusOr<NodeFlags> ResolveNodeFlags(const NodeFlagValues& given, const GetEnvFn& getenv) {
  NodeFlags out;
  // An empty variable is how a manifest leaves one unset; an empty flag is a mistake.
  auto env = [&getenv](const char* name) -> std::optional<std::string> {
    std::optional<std::string> v = getenv(name);
    if (v && v->empty()) return std::nullopt;
    return v;
  };
  if (given.root) {
    if (given.root->empty()) return absl::InvalidArgumentError("--root: empty");
    out.root = *given.root;
  } else if (std::optional<std::string> v = env(kRootEnv)) {
    out.root = *v;
  }
  // The variable is checked even when the flag wins: a bad value there is a mistake the runtime
  // reads as well.
  if (std::optional<std::string> v = env(kLncEnv)) {
    absl::StatusOr<int> lnc = ParseLnc(*v, kLncEnv);
    if (!lnc.ok()) return lnc.status();
    out.lnc = *lnc;
  }
  if (given.lnc) {
    absl::StatusOr<int> lnc = ParseLnc(*given.lnc, "--lnc");
    if (!lnc.ok()) return lnc.status();
    out.lnc = *lnc;
  }
  return out;
}

}  // namespace neuron
