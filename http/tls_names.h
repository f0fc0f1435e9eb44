#pragma once
// exporter-toolkit's names for the TLS settings of a web config (http/web_config.h), which are Go's
// crypto/tls names, and what OpenSSL calls the same things. exporter-toolkit reads them in
// web/tls_config.go (prometheus/exporter-toolkit: `Cipher.UnmarshalYAML` accepts the names of
// `tls.CipherSuites()`, the `curves` map, the `tlsVersions` map); Go lists its suites in
// src/crypto/tls/cipher_suites.go (golang/go: `CipherSuites()` and `InsecureCipherSuites()`).

#include <optional>
#include <string_view>

namespace neuron {

struct CipherSuiteNames {
  std::string_view go;       // "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
  std::string_view openssl;  // "ECDHE-RSA-AES128-GCM-SHA256"; empty for a TLS 1.3 suite
  bool forward_secret;       // ECDHE key exchange (TLS 1.3 suites always are)
};

// A suite of Go's `tls.CipherSuites()`, the list exporter-toolkit accepts; nullopt otherwise. Go's
// TLS 1.3 suites are among them and, as in Go, they cannot be chosen: TLS 1.3 always offers its
// three (`openssl` is empty for them).
std::optional<CipherSuiteNames> FindCipherSuite(std::string_view go_name);
// One of Go's `tls.InsecureCipherSuites()` (RC4, CBC with SHA-256): exporter-toolkit refuses them.
bool IsInsecureCipherSuite(std::string_view go_name);

// The OpenSSL group of a `curve_preferences` entry (CurveP256, CurveP384, CurveP521, X25519).
std::optional<std::string_view> FindCurve(std::string_view go_name);

// The TLS 1.2 suites offered when `cipher_suites` is not set: forward-secret (ECDHE) with an
// AEAD cipher only, in OpenSSL's cipher-list syntax.
inline constexpr std::string_view kDefaultTls12Suites =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

}  // namespace neuron
