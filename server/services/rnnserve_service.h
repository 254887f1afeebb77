#pragma once

// The rnnserve.v1.RnnServe gRPC service: Predict, StreamPredict, Generate, Evaluate, metadata
// and model control.
//
// Predict is served on gRPC's callback API: the handler validates the request, queues it on
// the model's scheduler and returns; the thread that finishes the batch builds the response
// and completes the call, so no thread waits for a batch (a model without a scheduler runs
// the request on the handler's thread). Generate is on the callback API too: its reactor
// writes each step's tokens when the generation queues them (generate_service.cc), so
// concurrent generations hold no server thread. The other methods use the synchronous API.
//
// Unary calls do not ask ServerContext::IsCancelled() before running: on the synchronous API
// that question polls the completion queue (a system call on every request), and it could
// only catch a cancel in the microseconds of decoding. The scheduler asks it while the request
// waits or runs (RunOptions::cancelled, with its deadline) and stops its work.

#include "rnnserve/v1/rnnserve.grpc.pb.h"
#include "server/auth/access_control.h"
#include "server/batching/async_runner.h"
#include "server/core/state_store.h"
#include "server/generation/generation_metrics.h"
#include "server/generation/generator.h"
#include "server/limits/admission.h"
#include "server/limits/stream_limits.h"
#include "server/model_repository.h"

namespace rnnserve::server {

// The process's limits the service applies (server/limits/); null members: no limit. Not owned.
struct RnnServeLimits {
  limits::RequestLimits requests;               // Predict, Evaluate(Stream), StreamPredict chunks
  limits::StreamLimits* streams = nullptr;      // StreamPredict streams
  limits::StreamLimits* generations = nullptr;  // Generate calls (--max-generations)
  // Where a Generate call's messages are built and written when its generation queues events
  // (the thread that stepped it goes on stepping). Null: on that thread.
  batching::AsyncRunner* completions = nullptr;
};

class RnnServeService final
    : public v1::RnnServe::WithCallbackMethod_Predict<
          v1::RnnServe::WithCallbackMethod_Generate<v1::RnnServe::Service>> {
 public:
  // Each handler first takes the access check's verdict (auth/access_control.h). `limits`: the
  // process's bounds on requests and streams (server/limits/).
  RnnServeService(ModelRepository* repository, core::StateStore* sequences,
                  RnnServeLimits limits = {})
      : repository_(repository),
        sequences_(sequences),
        limits_(limits),
        generator_(*generation::Generator::Create({})) {
    generator_->SetObserver(
        [m = generation_metrics_.get()](const generation::GenerationStats& s) { m->Record(s); });
  }
  // Generate's metrics (generation_metrics.h), for the /metrics exposer.
  const generation::GenerationMetrics& generation_metrics() const { return *generation_metrics_; }

  grpc::ServerUnaryReactor* Predict(grpc::CallbackServerContext* context,
                                    const v1::PredictRequest* request,
                                    v1::PredictResponse* response) override;
  grpc::Status Evaluate(grpc::ServerContext* context, const v1::EvaluateRequest* request,
                        v1::EvaluateResponse* response) override;
  grpc::Status EvaluateStream(grpc::ServerContext* context,
                              grpc::ServerReader<v1::EvaluateRequest>* reader,
                              v1::EvaluateResponse* response) override;
  grpc::Status StreamPredict(grpc::ServerContext* context,
                             grpc::ServerReaderWriter<v1::StreamPredictResponse,
                                                      v1::StreamPredictRequest>* stream) override;
  // Streams a language model's tokens as they are sampled (server/generation/generator.h).
  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const v1::GenerateRequest* request) override;
  grpc::Status ModelMetadata(grpc::ServerContext* context, const v1::ModelMetadataRequest* request,
                             v1::ModelMetadataResponse* response) override;
  grpc::Status ListModels(grpc::ServerContext* context, const v1::ListModelsRequest* request,
                          v1::ListModelsResponse* response) override;
  grpc::Status LoadModel(grpc::ServerContext* context, const v1::LoadModelRequest* request,
                         v1::LoadModelResponse* response) override;
  grpc::Status UnloadModel(grpc::ServerContext* context, const v1::UnloadModelRequest* request,
                           v1::UnloadModelResponse* response) override;
  grpc::Status ServerMetadata(grpc::ServerContext* context,
                              const v1::ServerMetadataRequest* request,
                              v1::ServerMetadataResponse* response) override;

 private:
  // One chunk of a stateful sequence.
  absl::Status StreamChunk(const grpc::ServerContext& context, const v1::StreamPredictRequest& req,
                           const core::StateStore::Caller& caller, v1::StreamPredictResponse* resp);

  ModelRepository* const repository_;
  core::StateStore* const sequences_;
  const RnnServeLimits limits_;
  const std::unique_ptr<generation::GenerationMetrics> generation_metrics_ =
      std::make_unique<generation::GenerationMetrics>();
  // Runs every Generate call's token loop (default bounds: generation::GeneratorOptions).
  const std::unique_ptr<generation::Generator> generator_;
};

}  // namespace rnnserve::server
