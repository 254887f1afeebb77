#pragma once

// Command-line flags of the rnnserve binary (CLI11): `--name=value` or `--name value`;
// `rnnserve --help` lists every flag with its default.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace rnnserve::server {

struct ServerFlags {
  std::string model_repository = "models/examples";
  // Where gRPC and the metrics endpoint listen: loopback unless told (the images say 0.0.0.0).
  // --host sets both.
  std::string address = "127.0.0.1";
  std::string metrics_address = "127.0.0.1";
  int port = 8500;
  int metrics_port = 8502;  // 0 disables the metrics endpoint
  // TLS on the gRPC port (auth/tls.h): certificate and key, and a CA for mutual TLS.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  // Bearer tokens (auth/token_auth.h): one token a line.
  std::string auth_token_file;
  std::string admin_token_file;
  bool reflection = true;  // --no-reflection turns gRPC server reflection off
  // On SIGTERM: seconds health answers NOT_SERVING before the listener closes, and then the
  // most that calls in flight and streams get to finish.
  int drain_seconds = 5;
  // Live stateful sequences one client (stream, token or connection) may hold per model.
  int max_sequences_per_client = 256;
  std::string log_level = "info";
  int64_t max_message_bytes = 64 << 20;
  int repository_poll_seconds = 0;  // 0: load once at start
  // gRPC's synchronous server runs each call on a thread that polls for the next one. At most
  // grpc_max_pollers threads poll at once: a thread that finishes a call while that many poll
  // exits, and a new one is started when fewer than grpc_min_pollers poll. gRPC's defaults
  // (1 and 2) start and stop a thread per call once several calls wait on the batcher at
  // once; these keep that many threads instead. 1 <= min <= max.
  int grpc_min_pollers = 4;
  int grpc_max_pollers = 64;
  // Each model file is first parsed in a child process that may take this long (0: off).
  int model_check_seconds = 120;
};

// Parses argv; unknown flags and bad values are INVALID_ARGUMENT naming the flag and the value.
// `--help` (or -h) sets *help and returns the defaults.
absl::StatusOr<ServerFlags> ParseServerFlags(int argc, char** argv, bool* help);
// The --help text: every flag, its meaning and default.
std::string ServerUsage();

}  // namespace rnnserve::server
