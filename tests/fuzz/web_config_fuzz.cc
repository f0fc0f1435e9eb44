// Fuzz target: the exporter-toolkit web configuration (http/web_config.h), an operator's file that
// decides whether TLS and basic auth are on. Properties: nothing throws; errors are
// InvalidArgument naming the source; what parses is usable as is: certificate and key paths
// present and absolute (relative ones resolved against the config's directory), a CA whenever
// client certificates are verified, users without ':' and with bcrypt-shaped hashes.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>

#include "http/web_config.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

void CheckPath(const std::string& path) {
  FUZZ_CHECK(!path.empty());
  FUZZ_CHECK(std::filesystem::path(path).is_absolute());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const absl::StatusOr<neuron::WebConfig> config =
        neuron::ParseWebConfig(text, "/etc/neuron", "fuzz");
    if (!config.ok()) {
      FUZZ_CHECK(config.status().code() == absl::StatusCode::kInvalidArgument);
      FUZZ_CHECK(config.status().message().substr(0, 5) == "fuzz:");
      return 0;
    }
    if (config->tls) {
      CheckPath(config->tls->cert_file);
      CheckPath(config->tls->key_file);
      if (config->tls->client_auth != neuron::TlsServerConfig::ClientAuth::kNone) {
        CheckPath(config->tls->client_ca_file);
      }
    }
    for (const auto& [user, hash] : config->basic_auth_users) {
      FUZZ_CHECK(user.find(':') == std::string::npos);
      FUZZ_CHECK(hash.size() == 60 && hash[0] == '$' && hash[1] == '2' && hash[3] == '$');
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "exception escaped: %s\n", e.what());
    FUZZ_CHECK(false);
  }
  return 0;
}
