#pragma once
// The two settings every tool takes alike: where the node's files are (--root, else NEURON_ROOT,
// else "/": docs/architecture.md#root-convention) and the logical NeuronCore config (--lnc, else
// NEURON_LOGICAL_NC_CONFIG, else the instance default: docs/architecture.md#lnc). A flag beats
// the environment; an unset or empty variable counts as not given. A bad value is an error that
// names the value and where it came from, so a typo never silently becomes the default: the
// exporter, neuron-ls, neuron-top and the device plugin all parse them here
// (docs/style.md#derive-once). Plain functions; thread-safe as long as `getenv` is.

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace neuron {

inline constexpr char kRootEnv[] = "NEURON_ROOT";
inline constexpr char kLncEnv[] = "NEURON_LOGICAL_NC_CONFIG";

// The environment, injectable for tests: the value of a variable, nullopt when unset.
using GetEnvFn = std::function<std::optional<std::string>(const char* name)>;
std::optional<std::string> RealGetEnv(const char* name);

// An LNC as a user writes it: "1" or "2". Anything else is InvalidArgument naming `source` (the
// flag or the variable) and the value: "--lnc: '3' is not 1 or 2".
absl::StatusOr<int> ParseLnc(std::string_view text, std::string_view source);

// --root and --lnc as the command line gave them; nullopt when not given.
struct NodeFlagValues {
  std::optional<std::string> root = std::nullopt;
  std::optional<std::string> lnc = std::nullopt;
};

struct NodeFlags {
  std::string root = "/";
  int lnc = 0;  // 0: neither flag nor variable set it; discovery takes the instance default
};

// Flags over environment over defaults. Errors: a bad LNC (flag or variable), an empty --root.
absl::StatusOr<NodeFlags> ResolveNodeFlags(const NodeFlagValues& given, const GetEnvFn& getenv);

}  // namespace neuron
