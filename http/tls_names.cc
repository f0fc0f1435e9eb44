#include "http/tls_names.h"

#include <array>

namespace neuron {
namespace {

// Go's tls.CipherSuites(), each with OpenSSL's name for the same suite (IANA code point).
constexpr std::array<CipherSuiteNames, 19> kSuites = {{
    {"TLS_RSA_WITH_3DES_EDE_CBC_SHA", "DES-CBC3-SHA", false},
    {"TLS_RSA_WITH_AES_128_CBC_SHA", "AES128-SHA", false},
    {"TLS_RSA_WITH_AES_256_CBC_SHA", "AES256-SHA", false},
    {"TLS_RSA_WITH_AES_128_GCM_SHA256", "AES128-GCM-SHA256", false},
    {"TLS_RSA_WITH_AES_256_GCM_SHA384", "AES256-GCM-SHA384", false},
    {"TLS_AES_128_GCM_SHA256", "", true},
    {"TLS_AES_256_GCM_SHA384", "", true},
    {"TLS_CHACHA20_POLY1305_SHA256", "", true},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "ECDHE-ECDSA-AES128-SHA", true},
    {"TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "ECDHE-ECDSA-AES256-SHA", true},
    {"TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA", "ECDHE-RSA-DES-CBC3-SHA", true},
    {"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA-AES128-SHA", true},
    {"TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "ECDHE-RSA-AES256-SHA", true},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256", true},
    {"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384", true},
    {"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256", true},
    {"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384", true},
    {"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA-CHACHA20-POLY1305", true},
    {"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305", true},
}};

constexpr std::array<std::string_view, 6> kInsecure = {
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
};

// Go's CurveID names as exporter-toolkit's `curves` map has them, and OpenSSL's group names.
constexpr std::array<std::pair<std::string_view, std::string_view>, 4> kCurves = {{
    {"CurveP256", "P-256"},
    {"CurveP384", "P-384"},
    {"CurveP521", "P-521"},
    {"X25519", "X25519"},
}};

}  // namespace

std::optional<CipherSuiteNames> FindCipherSuite(std::string_view go_name) {
  for (const CipherSuiteNames& s : kSuites) {
    if (s.go == go_name) return s;
  }
  return std::nullopt;
}

bool IsInsecureCipherSuite(std::string_view go_name) {
  for (std::string_view s : kInsecure) {
    if (s == go_name) return true;
  }
  return false;
}

std::optional<std::string_view> FindCurve(std::string_view go_name) {
  for (const auto& [go, openssl] : kCurves) {
    if (go == go_name) return openssl;
  }
  return std::nullopt;
}

}  // namespace neuron
