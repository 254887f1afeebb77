#include "server/flags.h"

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"

namespace rnnserve::server {
namespace {

// Bounded resources: docs/security.md "Bounded resources" says what each protects.
void AddLimitFlags(CLI::App& app, ServerFlags* f) {
  app.add_option("--max-inflight-bytes", f->max_inflight_bytes,
                 "request bytes (serialized, decoded, and the engine's working memory for the "
                 "batch, estimated) all requests in flight may hold, shared fairly among callers "
                 "(--fair-floor-percent); one more is RESOURCE_EXHAUSTED (default 1 GiB)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 50));
  app.add_option("--max-concurrent-per-model", f->max_concurrent_per_model,
                 "requests running at once on a model without dynamic batching, shared fairly "
                 "among callers (--fair-floor-percent); one more is RESOURCE_EXHAUSTED (0: 8 per "
                 "instance for one caller, and the newcomers' reserve on top)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--max-streams", f->max_streams,
                 "streaming calls (StreamPredict, ModelStreamInfer) open at once, shared fairly "
                 "among callers (--fair-floor-percent); one more is RESOURCE_EXHAUSTED")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-generations", f->max_generations,
                 "Generate calls open at once, shared fairly among callers "
                 "(--fair-floor-percent); one more is RESOURCE_EXHAUSTED. They run on gRPC's "
                 "callback API and hold no server thread (not counted in --max-streams)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--stream-idle-seconds", f->stream_idle_seconds,
                 "close a stream (StreamPredict, ModelStreamInfer, Generate) that carried no "
                 "message this "
                 "long, or whose client took no answer this long (it does not read); its "
                 "sequences end (0: never)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--grpc-max-threads", f->grpc_max_threads,
                 "gRPC server threads at most, pollers included (> --max-streams); a call that "
                 "finds none free is RESOURCE_EXHAUSTED")
      ->check(CLI::Range(2, 1 << 20))
      ->capture_default_str();
  app.add_option("--grpc-memory-bytes", f->grpc_memory_bytes,
                 "memory gRPC's connections may hold for messages being received or sent, "
                 "before the byte budget sees them (gRPC's ResourceQuota: past it gRPC reads "
                 "less and may cancel calls with RESOURCE_EXHAUSTED); 0: no bound of its own")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 50))
      ->capture_default_str();
  app.add_option("--max-sequences-per-client", f->max_sequences_per_client,
                 "live stateful sequences of one model one client (token, else address: every "
                 "connection of a host) may hold; the model's max_sequences caps all clients "
                 "together")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--fair-floor-percent", f->fair_floor_percent,
                 "fair shares of --max-inflight-bytes, --max-concurrent-per-model, "
                 "--max-streams and each model's max_sequences among callers (token, else "
                 "address), in percent of each bound: "
                 "a caller may hold at most max(this floor, the bound / callers holding some), "
                 "and one past its floor may not take the last floor of the bound, which stays "
                 "for new callers (100: first come, first served)")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
}

// Where stateful sequences live (docs/scale-out.md).
void AddSequenceStoreFlags(CLI::App& app, ServerFlags* f) {
  app.add_option("--sequence-store", f->sequence_store,
                 "where stateful sequences keep their states between chunks: empty, this "
                 "process; redis://HOST:PORT[/DB], a Redis shared by every replica (each chunk "
                 "stored before it is answered; any replica continues any sequence)")
      ->type_name("URL");
  app.add_option("--sequence-store-password-file", f->sequence_store_password_file,
                 "file whose first line is the Redis password (AUTH); TLS to Redis goes through "
                 "a local tunnel (docs/scale-out.md)")
      ->type_name("FILE");
  app.add_option("--sequence-durability", f->sequence_durability,
                 "with --sequence-store: when a sequence's states are written to Redis; chunk: "
                 "before each chunk is answered (nothing answered is lost if a replica dies); "
                 "drain: kept in the replica's memory, written when it drains (SIGTERM) or the "
                 "sequence idles out; fewer round trips, but a replica killed without draining "
                 "loses its sequences (counted in rnnserve_sequences_lost_total; "
                 "docs/deploy.md)")
      ->check(CLI::IsMember({"chunk", "drain"}))
      ->capture_default_str();
}

void AddFlags(CLI::App& app, ServerFlags* f) {
  // A flag given twice takes its last value (scripts append overrides to a base command line).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.description("rnnserve: serves a model repository over gRPC until SIGTERM or SIGINT");
  app.footer(
      "Other modes:\n"
      "  rnnserve inspect FILE [--json]   the architecture rnnserve runs for a model file\n"
      "                                   (see rnnserve inspect --help)");
  app.add_option("--model-repository", f->model_repository,
                 "models to serve: DIR/<model>/[config.pbtxt] and DIR/<model>/<version>/<file>")
      ->type_name("DIR")
      ->capture_default_str();
  app.add_option("--address", f->address, "address gRPC listens on (0.0.0.0: every interface)")
      ->type_name("ADDR")
      ->capture_default_str();
  app.add_option("--metrics-address", f->metrics_address, "address /metrics listens on")
      ->type_name("ADDR")
      ->capture_default_str();
  app.add_option_function<std::string>(
         "--host",
         [f](const std::string& host) {
           f->address = host;
           f->metrics_address = host;
         },
         "sets --address and --metrics-address both")
      ->type_name("ADDR");
  app.add_option("--port", f->port, "gRPC port (0: any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--metrics-port", f->metrics_port, "Prometheus /metrics port (0: off)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--http-port", f->http_port,
                 "HTTP/REST port on --address: KServe v2 REST (0: off)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option(
         "--http-max-connections", f->http_max_connections,
         "HTTP connections served at once, a thread each; as many more wait, beyond that none "
         "is accepted")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  app.add_option("--http-read-timeout-seconds", f->http_read_timeout_seconds,
                 "close an HTTP connection that sends nothing this long while a request is read, "
                 "or idles this long between requests")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  app.add_option("--tls-cert", f->tls_cert,
                 "PEM certificate chain: serve gRPC and HTTP over TLS (with --tls-key)")
      ->type_name("FILE");
  app.add_option("--tls-key", f->tls_key, "PEM private key of --tls-cert")->type_name("FILE");
  app.add_option("--tls-client-ca", f->tls_client_ca,
                 "PEM CA: mutual TLS, clients need a certificate it signed")
      ->type_name("FILE");
  app.add_option("--auth-token-file", f->auth_token_file,
                 "every call but health needs 'authorization: Bearer <token>' with a token of "
                 "this file (one a line)")
      ->type_name("FILE");
  app.add_option("--admin-token-file", f->admin_token_file,
                 "LoadModel and UnloadModel need a token of this file; inference tokens get "
                 "PERMISSION_DENIED there")
      ->type_name("FILE");
  app.add_flag("--allow-remote-model-control", f->remote_model_control,
               "let callers beyond loopback load and unload models without an admin token "
               "(otherwise they need --admin-token-file's tokens, and local callers need none)");
  app.add_flag("!--no-reflection", f->reflection, "turn gRPC server reflection off");
  app.add_option("--drain-seconds", f->drain_seconds,
                 "on SIGTERM, health answers NOT_SERVING for this long while requests are still "
                 "served, then calls in flight and streams get as long again to finish")
      ->check(CLI::Range(0, 3600))
      ->capture_default_str();
  app.add_option("--log-level", f->log_level, "least severe message logged")
      ->check(CLI::IsMember({"debug", "info", "warning", "error"}))
      ->capture_default_str();
  app.add_option("--max-message-bytes", f->max_message_bytes,
                 "largest request or response (default 64 MiB)")
      ->check(CLI::Range(int64_t{1}, (int64_t{1} << 31) - 1));
  app.add_option("--repository-poll-seconds", f->repository_poll_seconds,
                 "rescan the repository every N s and load what changed (0: load once at start; "
                 "LoadModel/UnloadModel always work)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_flag("--strict-readiness,!--no-strict-readiness", f->strict_readiness,
               "ready (gRPC health SERVING, KServe ServerReady) only when every model of the "
               "repository is loaded; --strict-readiness=false: ready once every model has been "
               "tried, even if some failed (liveness is unaffected)")
      ->capture_default_str();
  app.add_flag("--allow-symlinks-outside-repository", f->allow_symlinks_outside_repository,
               "serve model directories and files that are symbolic links to places outside "
               "--model-repository (refused by default)");
  app.add_option("--grpc-min-pollers", f->grpc_min_pollers,
                 "gRPC server threads kept waiting for calls")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--grpc-max-pollers", f->grpc_max_pollers,
                 "most gRPC server threads waiting for calls at once; a thread beyond it exits "
                 "after its call (>= --grpc-min-pollers)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--grpc-completion-queues", f->grpc_completion_queues,
                 "completion queues the gRPC server spreads calls over, each with its share of "
                 "the pollers")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--inline-run-budget-us", f->inline_run_budget_us,
                 "run a ModelInfer/Predict batch on the gRPC thread that received it when an "
                 "instance is idle and the model's recent engine calls took at most this long "
                 "(0: always hand it to the batcher's worker; -1: 250)")
      ->check(CLI::Range(-1, 1000000))
      ->capture_default_str();
  app.add_option("--completion-threads", f->completion_threads,
                 "threads that build and send the answers of requests a batcher's worker ran "
                 "(0: three quarters of the cores, 2 to 16)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  app.add_option("--model-check-seconds", f->model_check_seconds,
                 "parse each model file first in a child process that may take this long; a file "
                 "that makes the parser hang or crash fails its own load only (0: off)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  AddLimitFlags(app, f);
  AddSequenceStoreFlags(app, f);
}

}  // namespace

std::string ServerUsage() {
  ServerFlags flags;
  CLI::App app("", "rnnserve");
  AddFlags(app, &flags);
  return app.help();
}

absl::StatusOr<ServerFlags> ParseServerFlags(int argc, char** argv, bool* help) {
  ServerFlags flags;
  *help = false;
  CLI::App app("", "rnnserve");
  AddFlags(app, &flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    *help = true;
    return ServerFlags();
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(e.what());
  }
  if (flags.grpc_min_pollers > flags.grpc_max_pollers) {
    return absl::InvalidArgumentError(absl::StrCat("--grpc-min-pollers (", flags.grpc_min_pollers,
                                                   ") must not exceed --grpc-max-pollers (",
                                                   flags.grpc_max_pollers, ")"));
  }
  if (flags.grpc_max_threads <= flags.max_streams) {
    return absl::InvalidArgumentError(absl::StrCat("--grpc-max-threads (", flags.grpc_max_threads,
                                                   ") must exceed --max-streams (",
                                                   flags.max_streams, ")"));
  }
  return flags;
}

}  // namespace rnnserve::server
