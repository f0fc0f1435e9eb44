#pragma once
// A certificate authority made on the spot for the API stand-in's HTTPS: a CA certificate and a
// server certificate it signs for "localhost" and 127.0.0.1 (EC P-256, valid for a day), written
// as PEM files. The client trusts the CA file only (--ca-file), as a pod trusts the cluster CA
// from its service-account volume, so the TLS verification a real cluster needs is exercised.
//
// Thread-safe: no shared state.

#include <string>

#include "absl/status/statusor.h"

namespace neuron::sim::apiserver {

struct CaFiles {
  std::string ca_cert;      // DIR/ca.crt
  std::string server_cert;  // DIR/server.crt
  std::string server_key;   // DIR/server.key (mode 0600)
};

absl::StatusOr<CaFiles> MakeTestCa(const std::string& dir);

}  // namespace neuron::sim::apiserver
