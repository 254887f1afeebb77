#include "server/auth/tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
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
  // OpenSSL asks for the pass phrase of an encrypted key on the terminal when given no
  // callback: this one gives none, so such a key fails here with its own message.
  const auto no_pass_phrase = [](char*, int, int, void*) -> int { return 0; };
  Bio bio = MemoryBio(key_pem);
  const Key key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, no_pass_phrase, nullptr)
                    : nullptr);
  ERR_clear_error();
  if (!key && absl::StrContains(key_pem, "ENCRYPTED")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-key: ", options.key_file,
        " is encrypted and rnnserve asks for no pass phrase; give it the key unencrypted "
        "(openssl pkey -in ENCRYPTED.key -out KEY.key), readable by the server's user only"));
  }
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

// A warning when `pem`'s first certificate is outside its validity at `now`.
std::string ValidityWarning(const std::string& pem, const std::string& flag,
                            const std::string& path, absl::Time now) {
  const Cert cert = FirstCertificate(pem);
  ERR_clear_error();
  if (!cert) return "";
  const time_t t = absl::ToTimeT(now);
  if (X509_cmp_time(X509_get0_notAfter(cert.get()), const_cast<time_t*>(&t)) < 0) {
    return absl::StrCat(flag, ": the certificate in ", path,
                        " has expired: clients that check it refuse the connection");
  }
  if (X509_cmp_time(X509_get0_notBefore(cert.get()), const_cast<time_t*>(&t)) > 0) {
    return absl::StrCat(flag, ": the certificate in ", path,
                        " is not valid yet: clients that check it refuse the connection");
  }
  return "";
}

}  // namespace

std::vector<std::string> TlsWarnings(const TlsOptions& options, absl::Time now) {
  std::vector<std::string> warnings;
  for (const auto& [flag, path] :
       {std::pair<std::string, std::string>{"--tls-cert", options.cert_file},
        {"--tls-client-ca", options.client_ca_file}}) {
    if (path.empty()) continue;
    auto pem = ReadPemFile(path, flag);
    if (!pem.ok()) continue;
    if (std::string w = ValidityWarning(*pem, flag, path, now); !w.empty()) {
      warnings.push_back(std::move(w));
    }
  }
  return warnings;
}

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
