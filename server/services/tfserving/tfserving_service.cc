#include "server/services/tfserving/tfserving_service.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/auth/access_control.h"
#include "server/grpc_status.h"
#include "server/limits/caller_identity.h"
#include "server/services/tfserving/model_spec.h"
#include "server/services/tfserving/run_predict.h"
#include "server/services/tfserving/tensor_proto.h"
#include "server/tensor_codec.h"

namespace rnnserve::server::tfserving {
namespace {

namespace ts = tensorflow::serving;

// Decodes a Predict's inputs and output filter into the core request (views of the message).
absl::StatusOr<core::Request> DecodePredict(const ts::PredictRequest& request) {
  core::Request out;
  out.inputs.reserve(request.inputs().size());
  for (const auto& [name, tensor] : request.inputs()) {
    auto view = ViewOf(name, tensor);
    if (!view.ok()) return view.status();
    out.inputs.push_back(*std::move(view));
  }
  out.output_filter.assign(request.output_filter().begin(), request.output_filter().end());
  return out;
}

bool Wanted(const ts::PredictRequest& request, const std::string& name) {
  const auto& f = request.output_filter();
  return f.empty() || std::find(f.begin(), f.end(), name) != f.end();
}

// A method rnnserve does not serve: the caller's access is checked as for any method (the
// access table, server/auth/access_control.h), then UNIMPLEMENTED saying what to use instead.
grpc::Status Unimplemented(const grpc::ServerContext& context, const std::string& method,
                           const std::string& instead) {
  if (grpc::Status a = auth::Verdict(context); !a.ok()) return a;
  return grpc::Status(
      grpc::StatusCode::UNIMPLEMENTED,
      absl::StrCat("tensorflow.serving.", method, " is not served by rnnserve; ", instead));
}

}  // namespace

grpc::ServerUnaryReactor* PredictionService::Predict(grpc::CallbackServerContext* context,
                                                     const ts::PredictRequest* request,
                                                     ts::PredictResponse* response) {
  const UnaryStart start(context);
  if (start.refused()) return start.reactor();
  grpc::ServerUnaryReactor* reactor = start.reactor();
  auto fail = [&start](const absl::Status& s) { return start.Fail(s); };
  const Target target = TargetOf(request->model_spec());
  auto model = FindModel(*repository_, target);
  if (!model.ok()) return fail(model.status());
  const Servable& m = **model;
  if (auto s = CheckSignature(m, target.signature_name); !s.ok()) return fail(s);
  auto decoded = DecodePredict(*request);
  if (!decoded.ok()) return fail(decoded.status());
  SetModelSpec(m, target.signature_name, response->mutable_model_spec());
  RunOptions options = RunOptionsFor(*context);
  options.caller = limits::CallerIdentity(*context);  // whose share of the limits it takes
  auto* outputs = response->mutable_outputs();
  options.allocate_outputs = [&m, request, outputs](int i, engine::DType dtype,
                                                    const engine::Shape& shape) {
    const std::string& name = m.outputs()[i].name;
    if (!Wanted(*request, name)) return Unsent(dtype, shape);
    return Allocate(dtype, shape, &(*outputs)[name]);
  };
  RunPredict(*model, *decoded, static_cast<int64_t>(request->ByteSizeLong()), options_.limits,
             std::move(options),
             [model = *model, request, response,
              reactor](absl::StatusOr<std::vector<engine::Tensor>> result) {
               if (result.ok()) {
                 const auto& sigs = model->outputs();
                 for (size_t i = 0; i < result->size() && i < sigs.size(); ++i) {
                   if (!Wanted(*request, sigs[i].name)) continue;
                   Encode((*result)[i], &(*response->mutable_outputs())[sigs[i].name]);
                 }
               }
               reactor->Finish(ToGrpc(result.status()));
             });
  return reactor;
}

grpc::Status PredictionService::GetModelMetadata(grpc::ServerContext* context,
                                                 const ts::GetModelMetadataRequest* request,
                                                 ts::GetModelMetadataResponse* response) {
  if (grpc::Status a = auth::Verdict(*context); !a.ok()) {
    return a;
  }
  for (const std::string& field : request->metadata_field()) {
    if (field != "signature_def") {
      return ToGrpc(absl::InvalidArgumentError(
          absl::StrCat("Metadata field ", field, " is not supported; expected \"signature_def\"")));
    }
  }
  const Target target = TargetOf(request->model_spec());
  auto model = FindModel(*repository_, target);
  if (!model.ok()) return ToGrpc(model.status());
  SetMetadataSpec(**model, response->mutable_model_spec());
  (*response->mutable_metadata())["signature_def"].PackFrom(SignatureDefsOf(**model));
  return grpc::Status::OK;
}

grpc::Status PredictionService::Classify(grpc::ServerContext* context,
                                         const ts::ClassificationRequest*,
                                         ts::ClassificationResponse*) {
  return Unimplemented(*context, "PredictionService.Classify",
                       "it needs tf.Example inputs and a classification signature; call "
                       "Predict with the model's input tensors and read its output scores");
}

grpc::Status PredictionService::Regress(grpc::ServerContext* context, const ts::RegressionRequest*,
                                        ts::RegressionResponse*) {
  return Unimplemented(*context, "PredictionService.Regress",
                       "it needs tf.Example inputs and a regression signature; call Predict "
                       "with the model's input tensors");
}

grpc::Status PredictionService::MultiInference(grpc::ServerContext* context,
                                               const ts::MultiInferenceRequest*,
                                               ts::MultiInferenceResponse*) {
  return Unimplemented(*context, "PredictionService.MultiInference",
                       "call Predict once per model (each model has one signature, "
                       "\"serving_default\")");
}

grpc::Status ModelService::GetModelStatus(grpc::ServerContext* context,
                                          const ts::GetModelStatusRequest* request,
                                          ts::GetModelStatusResponse* response) {
  if (grpc::Status a = auth::Verdict(*context); !a.ok()) {
    return a;
  }
  return ToGrpc(tfserving::GetModelStatus(*repository_, TargetOf(request->model_spec()), response));
}

grpc::Status ModelService::HandleReloadConfigRequest(grpc::ServerContext* context,
                                                     const ts::ReloadConfigRequest*,
                                                     ts::ReloadConfigResponse*) {
  return Unimplemented(*context, "ModelService.HandleReloadConfigRequest",
                       "rnnserve serves the models of its --model-repository directory (with "
                       "--repository-poll-seconds it picks up added, changed and removed "
                       "models); rnnserve.v1.RnnServe LoadModel / UnloadModel reload and unload "
                       "one model");
}

}  // namespace rnnserve::server::tfserving
