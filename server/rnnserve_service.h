#pragma once

// The rnnserve.v1.RnnServe gRPC service: Predict, ModelMetadata, ListModels.

#include "rnnserve/v1/rnnserve.grpc.pb.h"
#include "server/model_repository.h"

namespace rnnserve::server {

class RnnServeService final : public v1::RnnServe::Service {
 public:
  explicit RnnServeService(const ModelRepository* repository) : repository_(repository) {}

  grpc::Status Predict(grpc::ServerContext* context, const v1::PredictRequest* request,
                       v1::PredictResponse* response) override;
  grpc::Status Evaluate(grpc::ServerContext* context, const v1::EvaluateRequest* request,
                        v1::EvaluateResponse* response) override;
  grpc::Status EvaluateStream(grpc::ServerContext* context,
                              grpc::ServerReader<v1::EvaluateRequest>* reader,
                              v1::EvaluateResponse* response) override;
  grpc::Status ModelMetadata(grpc::ServerContext* context, const v1::ModelMetadataRequest* request,
                             v1::ModelMetadataResponse* response) override;
  grpc::Status ListModels(grpc::ServerContext* context, const v1::ListModelsRequest* request,
                          v1::ListModelsResponse* response) override;

 private:
  const ModelRepository* const repository_;
};

}  // namespace rnnserve::server
