#include "driver-sim/controlplane/test_ca.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <memory>

#include "driver-sim/controlplane/validation.h"

namespace neuron::sim::apiserver {

namespace {

struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CertFree {
  void operator()(X509* c) const { X509_free(c); }
};
struct ExtFree {
  void operator()(X509_EXTENSION* e) const { X509_EXTENSION_free(e); }
};
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;
using Cert = std::unique_ptr<X509, CertFree>;

Key NewKey() { return Key(EVP_EC_gen("P-256")); }

bool AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  std::unique_ptr<X509_EXTENSION, ExtFree> ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
  return ext != nullptr && X509_add_ext(cert, ext.get(), -1) == 1;
}

// A certificate for `cn` with `key`, signed by `issuer_key` (issuer null: self-signed).
Cert NewCert(const char* cn, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key, int64_t serial,
             bool ca) {
  Cert cert(X509_new());
  if (cert == nullptr) return nullptr;
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), int64_t{24} * 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn),
                             -1, -1, 0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  const bool ok =
      ca ? AddExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE") &&
               AddExtension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign")
         : AddExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE") &&
               AddExtension(cert.get(), signer, NID_subject_alt_name,
                            "DNS:localhost,IP:127.0.0.1") &&
               AddExtension(cert.get(), signer, NID_ext_key_usage, "serverAuth");
  if (!ok || X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0) return nullptr;
  return cert;
}

bool WritePem(const std::string& path, X509* cert, EVP_PKEY* key) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return false;
  if (key != nullptr) fchmod(fileno(f), 0600);
  const bool ok = cert != nullptr
                      ? PEM_write_X509(f, cert) == 1
                      : PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
  return std::fclose(f) == 0 && ok;
}

}  // namespace

absl::StatusOr<CaFiles> MakeTestCa(const std::string& dir) {
  const Key ca_key = NewKey();
  const Key server_key = NewKey();
  if (ca_key == nullptr || server_key == nullptr) return absl::InternalError("EC key generation");
  const Cert ca = NewCert("neuron-sim apiserver CA", ca_key.get(), nullptr, ca_key.get(), 1, true);
  if (ca == nullptr) return absl::InternalError("CA certificate");
  const Cert server = NewCert("localhost", server_key.get(), ca.get(), ca_key.get(), 2, false);
  if (server == nullptr) return absl::InternalError("server certificate");
  CaFiles files{Cat(dir, "/ca.crt"), Cat(dir, "/server.crt"), Cat(dir, "/server.key")};
  if (!WritePem(files.ca_cert, ca.get(), nullptr) ||
      !WritePem(files.server_cert, server.get(), nullptr) ||
      !WritePem(files.server_key, nullptr, server_key.get())) {
    return absl::InternalError(Cat("cannot write the certificates under ", dir));
  }
  return files;
}

}  // namespace neuron::sim::apiserver
