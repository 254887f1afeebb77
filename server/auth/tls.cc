#include "server/auth/tls.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace rnnserve::server::auth {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Cert = std::unique_ptr<X509, X509Free>;
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;

Bio MemoryBio(const std::string& pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// The first certificate of a PEM text; null when it holds none.
Cert FirstCertificate(const std::string& pem) {
  Bio bio = MemoryBio(pem);
  return Cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

// INVALID_ARGUMENT naming the flag when the certificate, key or CA do not parse, or the key is
// not the certificate's: gRPC itself would only fail when the listener starts, without saying
// which file was wrong.
absl::Status CheckPem(const TlsOptions& options, const std::string& cert_pem,
                      const std::string& key_pem) {
  const Cert cert = FirstCertificate(cert_pem);
  if (!cert) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-cert: ", options.cert_file, " holds no PEM certificate"));
  }
  Bio bio = MemoryBio(key_pem);
  const Key key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-key: ", options.key_file, " holds no PEM private key (or it is encrypted)"));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-key: ", options.key_file, " is not the key of --tls-cert ", options.cert_file));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(what, ": cannot read ", path));
  std::stringstream bytes;
  bytes << in.rdbuf();
  if (bytes.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", path, " is empty"));
  }
  return bytes.str();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const TlsOptions& options) {
  if (options.cert_file.empty() != options.key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (options.cert_file.empty()) {
    if (!options.client_ca_file.empty()) {
      return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key");
    }
    return grpc::InsecureServerCredentials();
  }
  auto cert = ReadPemFile(options.cert_file, "--tls-cert");
  if (!cert.ok()) return cert.status();
  auto key = ReadPemFile(options.key_file, "--tls-key");
  if (!key.ok()) return key.status();
  if (absl::Status s = CheckPem(options, *cert, *key); !s.ok()) return s;
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  if (!options.client_ca_file.empty()) {
    auto ca = ReadPemFile(options.client_ca_file, "--tls-client-ca");
    if (!ca.ok()) return ca.status();
    if (!FirstCertificate(*ca)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tls-client-ca: ", options.client_ca_file, " holds no PEM certificate"));
    }
    ssl.pem_root_certs = *ca;
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

}  // namespace rnnserve::server::auth
