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
  // The HTTP/REST port (server/http/http_server.h), on --address; 0 turns it off. TLS, tokens,
  // --max-message-bytes and --max-inflight-bytes apply as on gRPC.
  int http_port = 8501;
  int http_max_connections = 256;      // served at once; as many more wait, no more accepted
  int http_read_timeout_seconds = 30;  // a read or keep-alive idle this long closes
  // TLS on the gRPC port (auth/tls.h): certificate and key, and a CA for mutual TLS.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  // Bearer tokens (auth/token_auth.h): one token a line.
  std::string auth_token_file;
  std::string admin_token_file;
  // LoadModel / UnloadModel from callers beyond loopback without admin tokens
  // (auth/access_control.h).
  bool remote_model_control = false;
  bool reflection = true;  // --no-reflection turns gRPC server reflection off
  // On SIGTERM: seconds health answers NOT_SERVING before the listener closes, and then the
  // most that calls in flight and streams get to finish.
  int drain_seconds = 5;
  std::string log_level = "info";
  int64_t max_message_bytes = 64 << 20;
  int repository_poll_seconds = 0;  // 0: load once at start
  // Ready (gRPC health SERVING, KServe ServerReady) only when every model of the repository is
  // loaded; false: once every model has been tried (server/readiness.h).
  bool strict_readiness = true;
  // Serve model files and directories that resolve (symlinks) outside --model-repository.
  bool allow_symlinks_outside_repository = false;
  // gRPC's synchronous server (every method but KServe ModelInfer and rnnserve.v1 Predict, which
  // are on the callback API) runs each call on a thread that polls for the next one. At most
  // grpc_max_pollers threads poll at once: a thread that finishes a call while that many poll
  // exits, and a new one is started when fewer than grpc_min_pollers poll. gRPC's defaults
  // (1 and 2) start and stop a thread per call once several calls run at once; these keep
  // that many threads instead. 1 <= min <= max.
  int grpc_min_pollers = 4;
  int grpc_max_pollers = 64;
  // Completion queues the synchronous server spreads calls over, each with its own pollers (the
  // pollers above are split between them). One, gRPC's default: on a 16-core H200 host one queue
  // per core served 0.82-0.94x the requests/s of one queue
  // (bench/results/server-gpu-h200-2026-11-26-profile.md).
  int grpc_completion_queues = 1;
  // KServe ModelInfer and Predict run a batch on the gRPC thread that received the request
  // when an instance is idle and the model's recent engine calls took at most this long
  // (ServableOptions::run_on_caller_budget); 0: always on the batcher's worker; -1: 250.
  int inline_run_budget_us = -1;
  // Threads that build and send the answers of requests run on a batcher's worker (the
  // callback API's ModelInfer and Predict); 0: three quarters of the cores, 2 to 16.
  int completion_threads = 0;
  // Each model file is first parsed in a child process that may take this long (0: off).
  int model_check_seconds = 30;
  // Bounded resources (docs/security.md "Bounded resources"); over a limit is
  // RESOURCE_EXHAUSTED naming it.
  int64_t max_inflight_bytes = int64_t{1} << 30;  // request bytes held at once, all requests
  int max_concurrent_per_model = 0;    // without dynamic batching; 0: 8 per instance + reserve
  int max_streams = 256;               // StreamPredict streams open at once
  int max_generations = 4096;          // Generate calls open at once (hold no gRPC thread)
  int stream_idle_seconds = 300;       // a stream without a message this long is closed; 0: never
  int grpc_max_threads = 512;          // gRPC server threads, pollers included (> max_streams)
  int max_sequences_per_client = 128;  // live sequences of one model per client
  // Memory gRPC's transports may hold for messages on their way in and out, before admission
  // sees them (grpc::ResourceQuota); 0: no bound of its own.
  int64_t grpc_memory_bytes = 0;
  // Per-caller shares of max_inflight_bytes, max_concurrent_per_model, max_streams and each
  // model's max_sequences
  // (server/limits/fair_share.h): each caller's floor and the newcomers' reserve, in percent
  // of each bound (at least 1 unit); 0..100, 100: first come, first served.
  int fair_floor_percent = 6;
  // Where stateful sequences live: "" this process; redis://HOST:PORT[/DB] (server/store/).
  std::string sequence_store;
  std::string sequence_store_password_file;  // first line: the Redis password
  // When a Redis store writes a sequence's states (server/store/redis_store.h, docs/deploy.md):
  // "chunk", before each chunk is answered (no answered chunk is ever lost); "drain", kept in
  // the replica's memory and written when it drains (SIGTERM) or the sequence leaves it
  // (a replica killed without draining loses the sequences it held). Needs --sequence-store.
  std::string sequence_durability = "chunk";
};

// Parses argv; unknown flags and bad values are INVALID_ARGUMENT naming the flag and the value.
// `--help` (or -h) sets *help and returns the defaults.
absl::StatusOr<ServerFlags> ParseServerFlags(int argc, char** argv, bool* help);
// The --help text: every flag, its meaning and default.
std::string ServerUsage();

}  // namespace rnnserve::server
