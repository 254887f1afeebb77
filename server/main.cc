// rnnserve: loads a model repository and serves it over gRPC until SIGTERM or SIGINT.

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/impl/server_builder_plugin.h>

#include <malloc.h>
#include <pthread.h>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/debugging/failure_signal_handler.h"
#include "absl/debugging/symbolize.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "server/auth/access_control.h"
#include "server/auth/tls.h"
#include "server/auth/token_auth.h"
#include "server/batching/async_runner.h"
#include "server/flags.h"
#include "server/http/http_server.h"
#include "server/inspect.h"
#include "server/limits/server_limits.h"
#include "server/log.h"
#include "server/metrics/endpoint.h"
#include "server/metrics/gpu_metrics.h"
#include "server/metrics/grpc_interceptor.h"
#include "server/metrics/server_metrics.h"
#include "server/model_check.h"
#include "server/model_repository.h"
#include "server/readiness.h"
#include "server/sequence_manager.h"
#include "server/services/health_service.h"
#include "server/services/kserve/kserve_service.h"
#include "server/services/kserve/rest_routes.h"
#include "server/services/rnnserve_service.h"
#include "server/services/tfserving/rest_routes.h"
#include "server/services/tfserving/tfserving_service.h"
#include "server/services/unparsed_request.h"
#include "server/store/redis_store.h"
#include "server/store/store_metrics.h"

namespace rnnserve::server {
namespace {

// Whether a listen address reaches this host only.
bool IsLoopbackAddress(const std::string& address) {
  return absl::StartsWith(address, "127.") || address == "::1" || address == "[::1]" ||
         address == "localhost";
}

// The variable's value; "" when it is not set.
std::string EnvironmentVariable(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

// Parses the command line into *flags and sets the log level. Returns -1 to go on serving,
// otherwise the exit code (0 after --help, 2 for a bad flag).
int ParseCommandLine(int argc, char** argv, ServerFlags* flags) {
  bool help = false;
  auto parsed = ParseServerFlags(argc, argv, &help);
  if (help) {
    std::fputs(ServerUsage().c_str(), stdout);
    return 0;
  }
  if (!parsed.ok()) {
    std::fprintf(stderr, "rnnserve: %s\n%s", std::string(parsed.status().message()).c_str(),
                 ServerUsage().c_str());
    return 2;
  }
  LogLevel level;
  if (!ParseLogLevel(parsed->log_level, &level)) {
    std::fprintf(stderr, "rnnserve: --log-level must be debug, info, warning or error; was '%s'\n",
                 parsed->log_level.c_str());
    return 2;
  }
  SetLogLevel(level);
  *flags = *std::move(parsed);
  return -1;
}

// The metrics endpoint on --metrics-port (null when it is 0).
absl::StatusOr<std::unique_ptr<metrics::Endpoint>> StartMetrics(const ServerFlags& flags,
                                                                metrics::ServerMetrics& m) {
  if (flags.metrics_port == 0) return nullptr;
  auto e = metrics::StartEndpoint(m, {.host = flags.metrics_address, .port = flags.metrics_port});
  if (e.ok()) {
    LogInfo(
        absl::StrCat("metrics on http://", flags.metrics_address, ":", (*e)->port(), "/metrics"));
  }
  return e;
}

// Stateful sequences, counted in rnnserve_sequences_active of their model version: in this
// process, or in Redis with --sequence-store (server/store/redis_store.h).
struct Sequences {
  std::unique_ptr<store::RedisClient> redis;     // used by `store`; null in process
  std::unique_ptr<store::StoreMetrics> metrics;  // of `store`; null in process
  std::unique_ptr<core::StateStore> store;
  store::RedisStore* redis_store = nullptr;  // `store` when it is Redis's: drained at SIGTERM
};

// The first line of the password file, without its line end.
absl::StatusOr<std::string> ReadPassword(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sequence-store-password-file: cannot read a line from '", path, "'"));
  }
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

absl::StatusOr<Sequences> CreateSequences(const ServerFlags& flags, metrics::ServerMetrics& m,
                                          ModelRepository* repository) {
  auto observer = [&m](const Servable* servable, bool started) {
    if (servable == nullptr) return;
    metrics::ModelMetrics* mm = m.Find(servable->name(), servable->version());
    if (mm == nullptr) return;
    if (started) {
      mm->SequenceStarted();
    } else {
      mm->SequenceEnded();
    }
  };
  Sequences out;
  if (flags.sequence_store.empty()) {
    if (!flags.sequence_store_password_file.empty()) {
      return absl::InvalidArgumentError(
          "--sequence-store-password-file needs --sequence-store redis://...");
    }
    if (flags.sequence_durability != "chunk") {
      return absl::InvalidArgumentError(
          absl::StrCat("--sequence-durability=", flags.sequence_durability,
                       " needs --sequence-store redis://... (sequences in this process are "
                       "never written anywhere)"));
    }
    auto manager =
        SequenceManager::Create({.observer = observer,
                                 .max_sequences_per_client = flags.max_sequences_per_client,
                                 .fair_floor_percent = flags.fair_floor_percent});
    if (!manager.ok()) return manager.status();
    out.store = *std::move(manager);
    return out;
  }
  auto endpoint = store::ParseRedisUrl(flags.sequence_store);
  if (!endpoint.ok()) return endpoint.status();
  store::RedisClient::Options client{.endpoint = *endpoint};
  if (!flags.sequence_store_password_file.empty()) {
    auto password = ReadPassword(flags.sequence_store_password_file);
    if (!password.ok()) return password.status();
    client.password = *std::move(password);
  }
  auto redis = store::RedisClient::Create(std::move(client));
  if (!redis.ok()) return redis.status();
  out.redis = *std::move(redis);
  out.metrics = std::make_unique<store::StoreMetrics>();
  // Unreachable now is no reason not to start (Redis may come up after the replicas): chunks
  // are UNAVAILABLE until it answers. A refused password is.
  if (auto ping = out.redis->Command({"PING"}); !ping.ok()) {
    if (absl::StrContains(ping.status().message(), "AUTH")) return ping.status();
    LogWarning(ping.status().message());
  }
  auto redis_store = store::RedisStore::Create(
      out.redis.get(),
      {.durability = flags.sequence_durability == "drain" ? store::RedisStore::Durability::kDrain
                                                          : store::RedisStore::Durability::kChunk,
       .facts =
           [](const Servable* s) {
             return store::RedisStore::ModelFacts{.version = s->version(),
                                                  .shapes = store::StateShapesOf(s->ir())};
           },
       .resolve = [repository](const std::string& model,
                               int64_t version) { return repository->Get(model, version); },
       .observer = observer,
       .max_sequences_per_client = flags.max_sequences_per_client,
       .fair_floor_percent = flags.fair_floor_percent,
       .on_round_trip = [m = out.metrics.get()](
                            store::StoreOp op, absl::Duration took,
                            absl::StatusCode code) { m->RoundTrip(op, took, code); },
       .on_continue = [m = out.metrics.get()](bool from_memory) { m->Continued(from_memory); },
       .on_lost = [m = out.metrics.get()] { m->Lost(); }});
  if (!redis_store.ok()) return redis_store.status();
  LogInfo(absl::StrCat("stateful sequences in ", endpoint->ToString(), ", written ",
                       flags.sequence_durability == "drain"
                           ? absl::StrCat("when this replica drains (--sequence-durability=drain; "
                                          "replica id ",
                                          (*redis_store)->replica_id(), ")")
                           : "after every chunk"));
  out.redis_store = redis_store->get();
  out.store = *std::move(redis_store);
  return out;
}

// Removes gRPC server reflection. Linking grpc++_reflection registers its plugin with every
// ServerBuilder; this option takes it out of one.
class WithoutReflection final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    std::erase_if(*plugins, [](const auto& p) { return p->name() == "proto_server_reflection"; });
  }
};

// The listening port, its credentials and the limits of the gRPC server, from the flags.
void ConfigureBuilder(const ServerFlags& flags,
                      const std::shared_ptr<grpc::ServerCredentials>& credentials,
                      grpc::ServerBuilder* builder, int* bound_port) {
  builder->AddListeningPort(absl::StrCat(flags.address, ":", flags.port), credentials, bound_port);
  // Pollers are per completion queue in gRPC: the flags' totals are split between the queues.
  const int queues = std::max(1, flags.grpc_completion_queues);
  const int min_pollers = std::max(1, (flags.grpc_min_pollers + queues - 1) / queues);
  builder->SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, queues);
  builder->SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, min_pollers);
  builder->SetSyncServerOption(
      grpc::ServerBuilder::SyncServerOption::MAX_POLLERS,
      std::max(min_pollers, (flags.grpc_max_pollers + queues - 1) / queues));
  builder->SetMaxReceiveMessageSize(static_cast<int>(flags.max_message_bytes));
  builder->SetMaxSendMessageSize(static_cast<int>(flags.max_message_bytes));
}

// Keeps the process's RSS near what it holds (docs/security.md "Memory"): blocks of 1 MiB or
// more (messages, tensors, the engine's working memory for a batch) come from the kernel and
// go back to it when freed, instead of staying in glibc's heaps at their high-water mark, and
// the heaps are few. Under the hostile soak's floods of 8 MB requests this cut peak RSS from
// 1.1-1.3 GB to 0.5-0.6 GB (bench/results/hostile-soak-2026-11-28.md). MALLOC_MMAP_THRESHOLD_
// and MALLOC_ARENA_MAX, when set, are left to glibc.
void ConfigureMalloc() {
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") == nullptr) mallopt(M_MMAP_THRESHOLD, 1 << 20);
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) {
    mallopt(M_ARENA_MAX, std::max(2, static_cast<int>(std::thread::hardware_concurrency() / 4)));
  }
}

int Main(int argc, char** argv) {
  // The model file check's child (model_check.h): parse one file and exit.
  if (argc >= 2 && std::string_view(argv[1]) == "--check-model") {
    return RunModelCheck(argc - 1, argv + 1);
  }
  // `rnnserve inspect FILE`: describe a model file and exit (inspect.h).
  if (argc >= 2 && std::string_view(argv[1]) == "inspect") return RunInspect(argc - 1, argv + 1);
  // A fatal signal (a crash in a library or a driver) prints its stack trace to stderr before
  // the process dies with that signal, so the log says where.
  absl::InitializeSymbolizer(argv[0]);
  absl::InstallFailureSignalHandler(absl::FailureSignalHandlerOptions());
  ConfigureMalloc();
  ServerFlags flags;
  if (int code = ParseCommandLine(argc, argv, &flags); code >= 0) return code;
  // TLS files and tokens are read before anything loads: a bad one stops the start at once.
  auto credentials = auth::ServerCredentials({.cert_file = flags.tls_cert,
                                              .key_file = flags.tls_key,
                                              .client_ca_file = flags.tls_client_ca});
  if (!credentials.ok()) {
    LogError(credentials.status().message());
    return 2;
  }
  auto authorizer = auth::TokenAuthorizer::Create(
      {.inference_token_file = flags.auth_token_file, .admin_token_file = flags.admin_token_file});
  if (!authorizer.ok()) {
    LogError(authorizer.status().message());
    return 2;
  }
  for (const std::string& w : (*authorizer)->warnings()) LogWarning(w);
  for (const std::string& w : auth::TlsWarnings(
           {.cert_file = flags.tls_cert, .client_ca_file = flags.tls_client_ca}, absl::Now())) {
    LogWarning(w);
  }
  EnableModelFileCheck("/proc/self/exe", absl::Seconds(flags.model_check_seconds));
  // A request with invalid UTF-8 makes protobuf log a line; at most one per 10 s gets out.
  RouteProtobufLog();
  RouteGrpcLog();
  // absl's Mutex deadlock detection is a debugging aid, on by default where absl was built
  // without NDEBUG (Debian's packages): it updates a global lock graph on every Mutex
  // acquire and destroy, gRPC's included. The sanitizer presets and the tests keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  // Signals are taken by sigwait below; every thread started from here on inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // The process's metrics, handed to everything that records. Metrics first, so a scrape
  // during a long model load already answers.
  metrics::ServerMetrics& process_metrics = metrics::ServerMetrics::Global();
  if (auto gpu = metrics::NewGpuCollector(); gpu.ok()) {
    process_metrics.AddCollectable(*std::move(gpu));
  } else {
    LogInfo(absl::StrCat("GPU metrics (nv_gpu_*) off: ", gpu.status().message()));
  }
  auto exposer = StartMetrics(flags, process_metrics);
  if (!exposer.ok()) {
    LogError(exposer.status().message());
    return 1;
  }
  // The threads that build and send the responses of requests a batcher's worker ran (the
  // callback API's handlers queue them and return; servable.h, ServableOptions::completions):
  // --completion-threads, by default three quarters of the cores, 2 to 16 (on a 16-core H100
  // host 12 served 1.06x the requests/s of 4 at 0.96x the CPU a request, tiny batched model at
  // concurrency 64: bench/results/server-gpu-h100-2026-11-26b.md). Before the repository, so
  // that it outlives the servables.
  batching::AsyncRunner completions(
      flags.completion_threads > 0
          ? flags.completion_threads
          : std::clamp(static_cast<int>(std::thread::hardware_concurrency()) * 3 / 4, 2, 16));
  // Created empty: the port listens first and the models load after (LoadAll below), so that
  // health and KServe readiness can say "not ready yet" while a large repository loads.
  auto repository = ModelRepository::Create(
      flags.model_repository,
      {.servable = {.metrics = &process_metrics,
                    .completions = &completions,
                    .run_on_caller_budget =
                        flags.inline_run_budget_us < 0
                            ? std::nullopt
                            : std::optional(absl::Microseconds(flags.inline_run_budget_us)),
                    // The engine's environment variables, read here once (README.md,
                    // "Environment variables"); nothing below main reads the environment.
                    .cpu_kernels = EnvironmentVariable("RNNSERVE_CPU_KERNELS"),
                    .whole_batch_graphs = EnvironmentVariable("RNNSERVE_GPU_MODEL_GRAPHS") != "0"},
       .allow_outside_root = flags.allow_symlinks_outside_repository});
  if (!repository.ok()) {
    LogError(repository.status().message());
    return 1;
  }
  auto sequences = CreateSequences(flags, process_metrics, repository->get());
  if (!sequences.ok()) {
    LogError(sequences.status().message());
    return 1;
  }
  if (sequences->metrics != nullptr && *exposer != nullptr) {
    (*exposer)->RegisterCollectable(sequences->metrics->registry());
  }
  // Bounded resources (server/limits/server_limits.h).
  auto server_limits = limits::CreateServerLimits(flags);
  if (!server_limits.ok()) {
    LogError(server_limits.status().message());
    return 1;
  }
  RnnServeService service(repository->get(), sequences->store.get(),
                          {.requests = server_limits->requests(),
                           .streams = server_limits->streams.get(),
                           .generations = server_limits->generations.get(),
                           .completions = &completions});
  if (*exposer != nullptr) {
    (*exposer)->RegisterCollectable(service.generation_metrics().registry());
  }
  // Live and ready: one answer for gRPC health and KServe ServerLive/ServerReady.
  Readiness readiness(repository->get(), {.strict = flags.strict_readiness});
  // Health checking on the synchronous API (health_service.h says why not gRPC's default).
  grpc::EnableDefaultHealthCheckService(false);
  auto health = HealthService::Create();
  if (!health.ok()) {
    LogError(health.status().message());
    return 1;
  }
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  if (!flags.reflection) builder.SetOption(std::make_unique<WithoutReflection>());
  int bound_port = 0;
  ConfigureBuilder(flags, *credentials, &builder, &bound_port);
  limits::LimitThreads(flags, &builder);
  builder.RegisterService(&service);
  // KServe v2 / Open Inference Protocol on the same port.
  // KServe sequence chunks wait for their sequence and run the engine: on threads of their own,
  // not gRPC's callback threads. Declared before the service, so that it outlives it.
  batching::AsyncRunner kserve_blocking(
      std::max(4, static_cast<int>(std::thread::hardware_concurrency())));
  kserve::KServeService kserve_service(repository->get(), {.server_version = RNNSERVE_VERSION,
                                                           .sequences = sequences->store.get(),
                                                           .limits = server_limits->requests(),
                                                           .streams = server_limits->streams.get(),
                                                           .blocking = &kserve_blocking,
                                                           .readiness = &readiness,
                                                           .metrics = &process_metrics});
  builder.RegisterService(&kserve_service);
  // TF Serving's PredictionService and ModelService on the same port.
  const tfserving::TfServingOptions tfserving_options{.limits = server_limits->requests()};
  tfserving::PredictionService tfserving_prediction(repository->get(), tfserving_options);
  tfserving::ModelService tfserving_models(repository->get(), tfserving_options);
  builder.RegisterService(&tfserving_prediction);
  builder.RegisterService(&tfserving_models);
  builder.RegisterService(health->get());
  // Access control first: the table of auth/access_control.h, for every service.
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors =
      metrics::NewInterceptorFactories(&process_metrics);
  interceptors.insert(
      interceptors.begin(),
      auth::NewAccessInterceptor(
          {.authorizer = authorizer->get(), .remote_model_control = flags.remote_model_control}));
  // Before the others: a request that does not parse is answered INVALID_ARGUMENT, and counted so.
  interceptors.insert(interceptors.begin(), NewUnparsedRequestInterceptor());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound_port == 0) {
    LogError(absl::StrCat("cannot listen on ", flags.address, ":", flags.port));
    return 1;
  }
  // The REST front ends on --http-port (server/http/http_server.h), with gRPC's TLS files,
  // tokens and limits.
  kserve::KServeRoutes kserve_routes(&kserve_service);
  tfserving::RestRoutes tfserving_routes(repository->get(), tfserving_options);
  std::unique_ptr<http::HttpServer> http_server;
  if (flags.http_port != 0) {
    auto started = http::HttpServer::Start({.address = flags.address,
                                            .port = flags.http_port,
                                            .tls = {.cert_file = flags.tls_cert,
                                                    .key_file = flags.tls_key,
                                                    .client_ca_file = flags.tls_client_ca},
                                            .authorizer = authorizer->get(),
                                            .bytes = server_limits->bytes.get(),
                                            .remote_model_control = flags.remote_model_control,
                                            .max_body_bytes = flags.max_message_bytes,
                                            .max_connections = flags.http_max_connections,
                                            .read_timeout_s = flags.http_read_timeout_seconds},
                                           {&kserve_routes, &tfserving_routes});
    if (!started.ok()) {
      LogError(started.status().message());
      return 1;
    }
    http_server = *std::move(started);
    LogInfo(absl::StrCat("HTTP on ", flags.tls_cert.empty() ? "http" : "https", "://",
                         flags.address, ":", http_server->port(),
                         " (KServe v2 REST, TF Serving REST)"));
  }
  const std::vector<std::string> services = {
      v1::RnnServe::service_full_name(), inference::GRPCInferenceService::service_full_name(),
      tensorflow::serving::PredictionService::service_full_name(),
      tensorflow::serving::ModelService::service_full_name()};
  // Known and NOT_SERVING until ready (the whole server "" too); then health follows readiness
  // through every load, failed load and unload.
  for (const std::string& name : services) (*health)->SetServingStatus(name, false);
  const int follow =
      (*repository)->Subscribe([&] { (*health)->SetServingStatus(readiness.Ready()); });
  LogInfo(absl::StrCat("rnnserve listening on ", flags.address, ":", bound_port, " (gRPC",
                       flags.tls_cert.empty() ? "" : " over TLS",
                       flags.tls_client_ca.empty() ? "" : ", client certificates required",
                       (*authorizer)->enabled() ? ", bearer tokens required" : "",
                       "); loading the models"));
  if (!IsLoopbackAddress(flags.address) && (flags.tls_cert.empty() || !(*authorizer)->enabled())) {
    LogWarning(absl::StrCat(
        "reachable beyond loopback (--address ", flags.address, ")",
        flags.tls_cert.empty() ? " in plaintext (no --tls-cert)" : "",
        (*authorizer)->enabled() ? "" : " without bearer tokens (no --auth-token-file)",
        ": anyone who reaches port ", bound_port, " can run the models; loading and unloading ",
        (*authorizer)->has_admin_tokens() || flags.remote_model_control
            ? "models is open to remote callers as configured"
            : "models stays local (--admin-token-file or --allow-remote-model-control opens it)"));
  }
  // The initial loads, on a thread of their own. Requests for a model that has loaded are
  // served at once; the server is ready when all have been tried, and with strict readiness
  // when all have loaded.
  std::thread loader([&] {
    ModelRepository& repo = **repository;
    repo.LoadAll();
    repo.StartPolling(flags.repository_poll_seconds);
    LogInfo(absl::StrCat(repo.ready_models(), " model(s) ready from ", flags.model_repository));
    if (absl::Status ready = readiness.CheckReady(); !ready.ok()) {
      LogWarning(absl::StrCat("not ready: ", ready.message()));
    }
  });

  int sig = 0;
  sigwait(&signals, &sig);
  const bool loading = !(*repository)->loaded_all();
  const int drain_seconds = loading ? 0 : flags.drain_seconds;
  LogInfo(absl::StrCat("signal ", sig,
                       loading ? ": stopping the initial loads"
                               : absl::StrCat(": draining for ", drain_seconds, " s"),
                       ", then shutting down"));
  // Never ready again (first: a load that ends now must not turn health SERVING). Loads stop
  // after the model in progress; a model file check in progress is killed.
  readiness.Shutdown();
  (*repository)->Stop();
  CancelModelFileChecks();
  // Health answers NOT_SERVING at once while requests are still served, so that load balancers
  // take this server out before the listener closes; then calls in flight and open streams get
  // as long again to finish. A server still loading was never ready: no drain.
  (*health)->Shutdown();
  // Sequences kept in memory (--sequence-durability=drain) go to Redis now, so that the
  // replicas the proxy sends their next chunks to continue them; chunks in flight write
  // theirs when they end, as every chunk from now on does.
  if (sequences->redis_store != nullptr) {
    const auto drained = sequences->redis_store->Drain();
    if (drained.flushed > 0 || drained.failed > 0) {
      LogInfo(absl::StrCat("handed ", drained.flushed, " sequence(s) over to the store"));
    }
    if (drained.failed > 0) {
      LogError(absl::StrCat(drained.failed,
                            " sequence(s) could not be written to the store and are lost"));
    }
  }
  absl::SleepFor(absl::Seconds(drain_seconds));
  if (http_server != nullptr) http_server->Stop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(drain_seconds));
  server->Wait();
  loader.join();
  (*repository)->Unsubscribe(follow);
  LogInfo("stopped");
  return 0;
}

}  // namespace
}  // namespace rnnserve::server

int main(int argc, char** argv) { return rnnserve::server::Main(argc, argv); }
