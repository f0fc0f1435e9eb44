// Fuzz target: the device plugin's configuration parsers (plugin/config.h), fed by operators
// through the config file, NEURON_DP_* variables and flags. Properties: nothing throws; every
// config-file error names its source as "fuzz:LINE: "; a file either applies whole or leaves the
// config untouched; what applies holds only valid values (durations >= 0, known policies, the
// four resources); a duration that parses prints back to the same value.
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

#include "plugin/config.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using neuron::plugin::Config;
using neuron::plugin::DiscoveryMode;
using neuron::plugin::NonContiguousPolicy;

bool SameConfig(const Config& a, const Config& b) {
  return a.root == b.root && a.kubelet_dir == b.kubelet_dir && a.listen == b.listen &&
         a.lnc == b.lnc && a.discovery == b.discovery && a.log_level == b.log_level &&
         a.resources == b.resources && a.noncontiguous == b.noncontiguous && a.cdi == b.cdi &&
         a.health.actions == b.health.actions && a.health.poll_period == b.health.poll_period &&
         a.socket_suffix == b.socket_suffix && a.podresources_period == b.podresources_period &&
         a.allocation_grace == b.allocation_grace;
}

void CheckValid(const Config& c) {
  FUZZ_CHECK(c.health.poll_period.count() >= 0);
  FUZZ_CHECK(c.podresources_period.count() >= 0);
  FUZZ_CHECK(c.allocation_grace.count() >= 0);
  FUZZ_CHECK(c.noncontiguous == NonContiguousPolicy::kWarn ||
             c.noncontiguous == NonContiguousPolicy::kReject);
  FUZZ_CHECK(c.discovery == DiscoveryMode::kAuto || c.discovery == DiscoveryMode::kDirectory ||
             c.discovery == DiscoveryMode::kUdev);
  FUZZ_CHECK(c.resources.size() == neuron::plugin::kAllResources.size());
  for (neuron::Resource r : neuron::plugin::kAllResources) FUZZ_CHECK(c.resources.count(r) == 1);
}

// "fuzz:LINE: what", LINE a 1-based line of the input (one past the end for errors at EOF).
void CheckSourceNamed(std::string_view message, std::string_view yaml) {
  constexpr std::string_view kPrefix = "fuzz:";
  FUZZ_CHECK(message.substr(0, kPrefix.size()) == kPrefix);
  size_t at = kPrefix.size();
  int64_t line = 0;
  while (at < message.size() && std::isdigit(static_cast<unsigned char>(message[at])) != 0 &&
         line < 1'000'000'000) {
    line = line * 10 + (message[at++] - '0');
  }
  FUZZ_CHECK(at > kPrefix.size() && at < message.size() && message[at] == ':');
  int64_t lines = 1;
  for (char ch : yaml) lines += ch == '\n' || ch == '\r' ? 1 : 0;  // yaml-cpp counts both
  FUZZ_CHECK(line >= 1 && line <= lines + 1);
}

void FuzzYaml(std::string_view yaml) {
  Config config;
  const Config before = config;
  const absl::Status s = neuron::plugin::ApplyConfigYaml(yaml, "fuzz", &config);
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CheckSourceNamed(std::string{s.message()}, yaml);
    FUZZ_CHECK(SameConfig(config, before));  // applied whole or not at all
    return;
  }
  CheckValid(config);
  // Applying the same file again is a no-op: every key sets, none accumulates.
  Config again = config;
  FUZZ_CHECK(neuron::plugin::ApplyConfigYaml(yaml, "fuzz", &again).ok());
  FUZZ_CHECK(SameConfig(again, config));
}

void FuzzDuration(std::string_view text) {
  const absl::StatusOr<std::chrono::milliseconds> d = neuron::plugin::ParseDuration(text);
  if (!d.ok()) {
    FUZZ_CHECK(d.status().code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  FUZZ_CHECK(d->count() >= 0);
  const auto back = neuron::plugin::ParseDuration(std::to_string(d->count()) + "ms");
  FUZZ_CHECK(back.ok() && *back == *d);
}

void FuzzResourceList(std::string_view text) {
  Config config;
  config.resources[neuron::Resource::kNeuronDevice] = true;
  const auto before = config.resources;
  const absl::Status s = neuron::plugin::ParseResourceList(text, &config);
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(config.resources == before);
    return;
  }
  CheckValid(config);
  // Every enabled resource was named, and the list of the enabled ones reads back the same.
  std::string list;
  for (neuron::Resource r : neuron::plugin::kAllResources) {
    if (!config.enabled(r)) continue;
    FUZZ_CHECK(text.find(neuron::plugin::ShortName(r)) != std::string_view::npos);
    list += std::string(list.empty() ? "" : ",") + std::string(neuron::plugin::ShortName(r));
  }
  Config again;
  FUZZ_CHECK(neuron::plugin::ParseResourceList(list, &again).ok());
  FUZZ_CHECK(again.resources == config.resources);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    FuzzYaml(text);
    // Environment variables and flags are one line; the whole input and its first line.
    FuzzDuration(text);
    FuzzResourceList(text);
    const std::string_view first = text.substr(0, text.find('\n'));
    FuzzDuration(first);
    FuzzResourceList(first);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "exception escaped: %s\n", e.what());
    FUZZ_CHECK(false);
  }
  return 0;
}
