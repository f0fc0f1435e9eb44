#pragma once
// An environment for code that reads its variables through GetEnvFn (core/model/node_flags.h):
// the variables of `vars` and no other, whatever the test process's own environment holds.

#include <map>
#include <optional>
#include <string>
#include <utility>

#include "core/model/node_flags.h"

namespace neuron::testing {

inline GetEnvFn EnvOf(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace neuron::testing
