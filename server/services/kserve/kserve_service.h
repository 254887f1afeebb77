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
//     The client's deadline bounds the wait; ServerContext::IsCancelled() is not asked (on
//     the synchronous API it polls the completion queue, a system call per request), so a
//     cancelled request runs and gRPC drops its answer.
//   - ModelStreamInfer: each request is answered on the stream, in order. A failed request is
//     answered with error_message "<CODE>: <message>" and the stream goes on.
//   - ModelConfig: see model_config_view.h. ModelStatistics: see statistics.h (every front end's requests); an empty name
//     reports every loaded model version.
// Model versions are strings on this protocol: "" is the newest loaded version.

#include <string>

#include "absl/functional/any_invocable.h"

#include "inference/grpc_service.grpc.pb.h"
#include "server/auth/access_control.h"
#include "server/batching/async_runner.h"
#include "server/core/state_store.h"
#include "server/limits/admission.h"
#include "server/limits/stream_limits.h"
#include "server/model_repository.h"
#include "server/readiness.h"
#include "server/services/kserve/sequence.h"
#include "server/metrics/server_metrics.h"
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

// ModelInfer on the callback API, the other methods on the synchronous one.
using KServeServiceBase = inference::GRPCInferenceService::WithCallbackMethod_ModelInfer<
    inference::GRPCInferenceService::Service>;

class KServeService final : public KServeServiceBase {
 public:
  // `repository` is not owned and must outlive the service.
  KServeService(const ModelRepository* repository, KServeServiceOptions options)
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

 private:
  // One inference request in flight: what Infer keeps until its response is built.
  struct Call;
  using Finished = absl::AnyInvocable<void(absl::Status)>;
  // Runs `request` and calls `finished` exactly once: with OK once `response` is complete, or
  // with the error. `finished` runs on this thread or on the thread the answer was handed to
  // (Servable::RunAsync; options_.blocking for a sequence's chunk); `context` (may be null) is
  // used before Infer returns, `request` and `response` must stay valid until `finished` runs.
  // `streamed`: a request of ModelStreamInfer, counted here as a ModelInfer (the metrics
  // interceptor counts the stream as one call).
  void Infer(const grpc::ServerContextBase* context, const inference::ModelInferRequest& request,
             inference::ModelInferResponse* response, Finished finished, bool streamed = false);
  // Infer of a streamed request, waiting for the answer (ModelStreamInfer answers in order).
  absl::Status InferAndWait(const grpc::ServerContextBase* context,
                            const inference::ModelInferRequest& request,
                            inference::ModelInferResponse* response);
  // Runs the call's chunk of a stateful sequence (blocking) and completes it.
  void RunSequence(std::unique_ptr<Call> call);
  // Builds the response from `outputs` (or takes their error) and finishes the call.
  void Complete(std::unique_ptr<Call> call, absl::StatusOr<std::vector<engine::Tensor>> outputs);
  // ModelStatistics of one version.
  void Fill(const std::string& model, int64_t version, inference::ModelStatistics* out) const;
  // Adds the call's decode and encode times to its version's statistics, releases what it holds and calls its `finished`.
  void Finish(std::unique_ptr<Call> call, absl::Status status);

  const ModelRepository* const repository_;
  const KServeServiceOptions options_;
  metrics::ServerMetrics& metrics_ =
      options_.metrics != nullptr ? *options_.metrics : metrics::ServerMetrics::Global();
};

}  // namespace rnnserve::server::kserve
