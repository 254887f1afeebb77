#pragma once

// The KServe v2 / Open Inference Protocol service (package `inference`,
// GRPCInferenceService) on top of the model repository. It is registered on the same
// grpc::ServerBuilder, and so the same port, as rnnserve.v1.
//
// Behaviour:
//   - ServerLive and ServerReady: KServeServiceOptions::readiness's answers (server/readiness.h,
//     the same as gRPC health's); ModelReady: false, not an error, for an unknown model.
//   - ModelInfer: see infer_codec.h for tensors and parameters. It is served on gRPC's
//     callback API: the handler decodes the request and queues it on the model's scheduler
//     and returns; the thread that finishes the batch encodes the response and completes the
//     call, so no thread waits for a batch (a chunk of a stateful sequence runs on
//     KServeServiceOptions::blocking's threads). Errors: unknown model or
//     version NOT_FOUND; bad datatype, shape, contents or parameter INVALID_ARGUMENT naming the
//     input and the expected value; a sequence request without a state store
//     UNIMPLEMENTED; the servable's own codes (DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED) as is.
//     The client's deadline bounds the wait, and its cancel (ServerContext::IsCancelled, asked
//     by the scheduler while the request waits or runs: server/batching/abandon_watch.h) stops
//     the request's work.
//   - ModelStreamInfer: each request is answered on the stream, in order. A failed request is
//     answered with error_message "<CODE>: <message>" and the stream goes on.
//   - ModelConfig: see model_config_view.h. ModelStatistics: see statistics.h (every front end's
//   requests); an empty name
//     reports every loaded model version.
//   - The model repository extension: RepositoryIndex (inference access, as listing is)
//     lists every model of the repository with each loaded version ("READY") or its reason
//     ("UNAVAILABLE"); RepositoryModelLoad and RepositoryModelUnload are model control (admin,
//     auth/access_control.h): load or reload a model (ModelRepository::Load), stop serving it.
//     Parameters (Triton's config override and files) are INVALID_ARGUMENT, but
//     unload_dependents: models come from the repository's files only.
// The HTTP front end (rest_routes.h) answers the same through the protocol-neutral methods
// below (Infer, Metadata, ...), so that both transports share one flow and one statistics.
// Model versions are strings on this protocol: "" is the newest loaded version.

#include <functional>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"

#include "inference/grpc_service.grpc.pb.h"
#include "server/auth/access_control.h"
#include "server/batching/async_runner.h"
#include "server/core/state_store.h"
#include "server/limits/admission.h"
#include "server/limits/stream_limits.h"
#include "server/metrics/server_metrics.h"
#include "server/model_repository.h"
#include "server/readiness.h"
#include "server/services/kserve/infer_codec.h"
#include "server/services/kserve/sequence.h"
#include "server/services/kserve/statistics.h"

namespace rnnserve::server::kserve {

struct KServeServiceOptions {
  std::string server_name = "rnnserve";
  std::string server_version;
  // Keeps sequence requests' states (core/state_store.h); not owned, must outlive the service.
  // Null: sequence requests fail with UNIMPLEMENTED and ServerMetadata does not list the "sequence"
  // extension.
  core::StateStore* sequences = nullptr;
  // Request bytes in flight and per-model concurrency (server/limits/); null members: none.
  limits::RequestLimits limits;
  // ModelStreamInfer streams count against --max-streams and close when idle; null: no limit.
  limits::StreamLimits* streams = nullptr;
  // Threads for the ModelInfer work that blocks (a sequence's chunk waits for its sequence and
  // runs the engine), so that it does not hold gRPC's callback threads; not owned, must
  // outlive the service. Null: on the handler's thread.
  batching::AsyncRunner* blocking = nullptr;
  // ServerLive and ServerReady; not owned, must outlive the service. Null: strict readiness
  // of the repository.
  const Readiness* readiness = nullptr;
  // Where ModelStatistics reads what the versions' metrics tallied, and where this service
  // adds its decode and encode times; not owned. Null: the process's (ServerMetrics::Global).
  metrics::ServerMetrics* metrics = nullptr;
};

// One transport's side of an inference request (gRPC ModelInfer, HTTP .../infer): decoding
// the request for the model that serves it, and encoding the answer. KServeService::Infer
// does the rest, the same for both: admission, scheduling, sequences, statistics.
class InferExchange {
 public:
  virtual ~InferExchange() = default;
  virtual absl::StatusOr<DecodedInfer> Decode(const Servable& model) = 0;
  // RunOptions::allocate_outputs; null: the engine's own tensors, which Encode copies once.
  virtual OutputAllocator Allocate(const Servable& model, const DecodedInfer& decoded) = 0;
  virtual void Encode(const Servable& ran_on, const DecodedInfer& decoded,
                      const std::vector<engine::Tensor>& outputs) = 0;
  // Who sends it (limits/caller_identity.h): a sequence belongs to its caller. Asked before
  // Infer returns, for sequence requests only.
  virtual std::string Caller() const = 0;
};

// Which model an inference request is for, and what the transport knows of it.
struct InferTarget {
  std::string model;
  std::string version;        // "" the newest loaded
  int64_t request_bytes = 0;  // reserved in the byte budget; 0: the transport holds them
  absl::Time deadline = absl::InfiniteFuture();
  // Whether the client cancelled the call (RunOptions::cancelled); null: it cannot tell.
  std::function<bool()> cancelled;
  // Count the request in its model's metrics here: a streamed ModelInfer (the metrics
  // interceptor counts the stream as one call) and an HTTP request (no interceptor).
  bool count_request = false;
};

// INVALID_ARGUMENT: a repository parameter (Triton's "config", "file:...") is not taken.
absl::Status ParameterRefused(const std::string& model, const std::string& parameter);

// ModelInfer on the callback API, the other methods on the synchronous one.
using KServeServiceBase = inference::GRPCInferenceService::WithCallbackMethod_ModelInfer<
    inference::GRPCInferenceService::Service>;

class KServeService final : public KServeServiceBase {
 public:
  // `repository` is not owned and must outlive the service.
  KServeService(ModelRepository* repository, KServeServiceOptions options)
      : repository_(repository), options_(std::move(options)) {}

  grpc::Status ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* response) override;
  grpc::Status ServerReady(grpc::ServerContext*, const inference::ServerReadyRequest*,
                           inference::ServerReadyResponse* response) override;
  grpc::Status ModelReady(grpc::ServerContext*, const inference::ModelReadyRequest* request,
                          inference::ModelReadyResponse* response) override;
  grpc::Status ServerMetadata(grpc::ServerContext*, const inference::ServerMetadataRequest*,
                              inference::ServerMetadataResponse* response) override;
  grpc::Status ModelMetadata(grpc::ServerContext*, const inference::ModelMetadataRequest* request,
                             inference::ModelMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override;
  grpc::Status ModelStreamInfer(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<inference::ModelStreamInferResponse, inference::ModelInferRequest>*
          stream) override;
  grpc::Status ModelConfig(grpc::ServerContext*, const inference::ModelConfigRequest* request,
                           inference::ModelConfigResponse* response) override;
  grpc::Status ModelStatistics(grpc::ServerContext*,
                               const inference::ModelStatisticsRequest* request,
                               inference::ModelStatisticsResponse* response) override;

  grpc::Status RepositoryIndex(grpc::ServerContext* context,
                               const inference::RepositoryIndexRequest* request,
                               inference::RepositoryIndexResponse* response) override;
  grpc::Status RepositoryModelLoad(grpc::ServerContext* context,
                                   const inference::RepositoryModelLoadRequest* request,
                                   inference::RepositoryModelLoadResponse*) override;
  grpc::Status RepositoryModelUnload(grpc::ServerContext* context,
                                     const inference::RepositoryModelUnloadRequest* request,
                                     inference::RepositoryModelUnloadResponse*) override;

  // Triton's extensions that rnnserve does not serve: the caller's access is checked, then
  // UNIMPLEMENTED with Unsupported's message (kserve_unsupported.cc).
  grpc::Status SystemSharedMemoryStatus(grpc::ServerContext* context,
                                        const inference::SystemSharedMemoryStatusRequest*,
                                        inference::SystemSharedMemoryStatusResponse*) override;
  grpc::Status SystemSharedMemoryRegister(grpc::ServerContext* context,
                                          const inference::SystemSharedMemoryRegisterRequest*,
                                          inference::SystemSharedMemoryRegisterResponse*) override;
  grpc::Status SystemSharedMemoryUnregister(
      grpc::ServerContext* context, const inference::SystemSharedMemoryUnregisterRequest*,
      inference::SystemSharedMemoryUnregisterResponse*) override;
  grpc::Status CudaSharedMemoryStatus(grpc::ServerContext* context,
                                      const inference::CudaSharedMemoryStatusRequest*,
                                      inference::CudaSharedMemoryStatusResponse*) override;
  grpc::Status CudaSharedMemoryRegister(grpc::ServerContext* context,
                                        const inference::CudaSharedMemoryRegisterRequest*,
                                        inference::CudaSharedMemoryRegisterResponse*) override;
  grpc::Status CudaSharedMemoryUnregister(grpc::ServerContext* context,
                                          const inference::CudaSharedMemoryUnregisterRequest*,
                                          inference::CudaSharedMemoryUnregisterResponse*) override;
  grpc::Status TraceSetting(grpc::ServerContext* context, const inference::TraceSettingRequest*,
                            inference::TraceSettingResponse*) override;
  grpc::Status LogSettings(grpc::ServerContext* context, const inference::LogSettingsRequest*,
                           inference::LogSettingsResponse*) override;

  // The protocol-neutral answers both transports give; access is checked by the caller.
  using Finished = absl::AnyInvocable<void(absl::Status)>;
  // Runs an inference request and calls `finished` exactly once: with OK once `exchange` has
  // encoded the answer, or with the error. `finished` runs on this thread or on the thread the
  // answer was handed to (Servable::RunAsync; options_.blocking for a sequence's chunk);
  // `exchange` must stay valid until it runs.
  void Infer(const InferTarget& target, InferExchange* exchange, Finished finished);
  bool Live() const;
  // OK when ready, else UNAVAILABLE saying why (readiness.h).
  absl::Status CheckReady() const;
  // false for an unknown model or one that failed to load; errors for a bad version.
  absl::StatusOr<bool> ModelIsReady(const std::string& name, const std::string& version) const;
  inference::ServerMetadataResponse Metadata() const;
  absl::StatusOr<inference::ModelMetadataResponse> Metadata(const std::string& name,
                                                            const std::string& version) const;
  absl::StatusOr<inference::ModelConfig> Config(const std::string& name,
                                                const std::string& version) const;
  // Every loaded model version for an empty name.
  absl::StatusOr<inference::ModelStatisticsResponse> Statistics(const std::string& name,
                                                                const std::string& version) const;
  inference::RepositoryIndexResponse Index(bool ready_only) const;
  absl::Status Load(const std::string& name);
  absl::Status Unload(const std::string& name);

 private:
  // One inference request in flight: what Infer keeps until its response is built.
  struct Call;
  // Infer of a streamed request, waiting for the answer (ModelStreamInfer answers in order).
  absl::Status InferAndWait(const grpc::ServerContextBase& context,
                            const inference::ModelInferRequest& request,
                            inference::ModelInferResponse* response);
  // Runs the call's chunk of a stateful sequence (blocking) and completes it.
  void RunSequence(std::unique_ptr<Call> call);
  // Builds the response from `outputs` (or takes their error) and finishes the call.
  void Complete(std::unique_ptr<Call> call, absl::StatusOr<std::vector<engine::Tensor>> outputs);
  // ModelStatistics of one version.
  void Fill(const std::string& model, int64_t version, inference::ModelStatistics* out) const;
  // Adds the call's decode and encode times to its version's statistics, releases what it holds and
  // calls its `finished`.
  void Finish(std::unique_ptr<Call> call, absl::Status status);

  ModelRepository* const repository_;
  const KServeServiceOptions options_;
  metrics::ServerMetrics& metrics_ =
      options_.metrics != nullptr ? *options_.metrics : metrics::ServerMetrics::Global();
};

}  // namespace rnnserve::server::kserve
