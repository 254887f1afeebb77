#pragma once

// TLS on the gRPC port, from PEM files.

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace rnnserve::server::auth {

struct TlsOptions {
  std::string cert_file;       // the server's certificate chain; empty: plaintext
  std::string key_file;        // its private key; needed with cert_file
  std::string client_ca_file;  // non-empty: mutual TLS, clients need a certificate it signed
};

// Plaintext credentials when cert_file is empty; else TLS, and mutual TLS with a client CA.
// INVALID_ARGUMENT naming the flag of a file that is missing, unreadable or empty, that holds no
// PEM certificate (--tls-cert, --tls-client-ca) or no PEM private key (--tls-key), of an
// encrypted key (no pass phrase is ever asked for on the terminal), of a key that is not the
// certificate's, or of a half-given pair.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const TlsOptions& options);

// Startup warnings for TLS files that load but will fail clients: the --tls-cert certificate
// (or the --tls-client-ca one) has expired at `now`, or is not valid yet. Empty without TLS or
// when a file cannot be read (ServerCredentials says why).
std::vector<std::string> TlsWarnings(const TlsOptions& options, absl::Time now);

// A file's bytes; INVALID_ARGUMENT naming `what` when it cannot be read or is empty.
absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& what);

}  // namespace rnnserve::server::auth
