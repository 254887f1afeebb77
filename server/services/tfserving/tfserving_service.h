#pragma once

// TF Serving's gRPC API (tensorflow.serving.PredictionService and ModelService) on the server's
// gRPC port, beside rnnserve.v1 and KServe, so that clients written against TF Serving (its
// PyPI stubs, tensorflow-serving-api) call rnnserve unchanged.
//
//   - Predict: ModelSpec (name; version or version_label; signature_name "" or
//     "serving_default", see model_spec.h), inputs as TensorProto (tensor_content or the typed
//     fields, tensor_proto.h), output_filter. Served on gRPC's callback API: the handler
//     decodes, validates and queues the request and returns; the thread that finishes the batch
//     completes the call. Outputs are written by the scheduler straight into the response's
//     float_val / int64_val (RunOptions::allocate_outputs). Errors: unknown model or version
//     NOT_FOUND; unknown signature, bad dtype, shape or values INVALID_ARGUMENT naming the input
//     and the expected value; the limits' RESOURCE_EXHAUSTED; the servable's own codes.
//   - GetModelMetadata: metadata_field "signature_def" (the only one TF Serving knows; empty
//     means it too): a SignatureDefMap in an Any.
//   - GetModelStatus: see model_spec.h.
//   - Classify, Regress, MultiInference and HandleReloadConfigRequest: UNIMPLEMENTED, saying
//     what to use instead.
// Access: the table of server/auth/access_control.cc; every method needs inference access,
// HandleReloadConfigRequest admin access (in TF Serving it changes what is served).

#include "server/limits/admission.h"
#include "server/model_repository.h"
#include "tensorflow_serving/apis/model_service.grpc.pb.h"
#include "tensorflow_serving/apis/prediction_service.grpc.pb.h"

namespace rnnserve::server::tfserving {

struct TfServingOptions {
  // Request bytes in flight and per-model concurrency; null members: none.
  limits::RequestLimits limits;
};

using PredictionServiceBase = tensorflow::serving::PredictionService::WithCallbackMethod_Predict<
    tensorflow::serving::PredictionService::Service>;

class PredictionService final : public PredictionServiceBase {
 public:
  // `repository` is not owned and must outlive the service.
  PredictionService(const ModelRepository* repository, TfServingOptions options)
      : repository_(repository), options_(options) {}

  grpc::ServerUnaryReactor* Predict(grpc::CallbackServerContext* context,
                                    const tensorflow::serving::PredictRequest* request,
                                    tensorflow::serving::PredictResponse* response) override;
  grpc::Status GetModelMetadata(grpc::ServerContext* context,
                                const tensorflow::serving::GetModelMetadataRequest* request,
                                tensorflow::serving::GetModelMetadataResponse* response) override;
  grpc::Status Classify(grpc::ServerContext* context,
                        const tensorflow::serving::ClassificationRequest* request,
                        tensorflow::serving::ClassificationResponse* response) override;
  grpc::Status Regress(grpc::ServerContext* context,
                       const tensorflow::serving::RegressionRequest* request,
                       tensorflow::serving::RegressionResponse* response) override;
  grpc::Status MultiInference(grpc::ServerContext* context,
                              const tensorflow::serving::MultiInferenceRequest* request,
                              tensorflow::serving::MultiInferenceResponse* response) override;

 private:
  const ModelRepository* const repository_;
  const TfServingOptions options_;
};

class ModelService final : public tensorflow::serving::ModelService::Service {
 public:
  ModelService(const ModelRepository* repository, TfServingOptions options)
      : repository_(repository), options_(options) {}

  grpc::Status GetModelStatus(grpc::ServerContext* context,
                              const tensorflow::serving::GetModelStatusRequest* request,
                              tensorflow::serving::GetModelStatusResponse* response) override;
  grpc::Status HandleReloadConfigRequest(
      grpc::ServerContext* context, const tensorflow::serving::ReloadConfigRequest* request,
      tensorflow::serving::ReloadConfigResponse* response) override;

 private:
  const ModelRepository* const repository_;
  const TfServingOptions options_;
};

}  // namespace rnnserve::server::tfserving
