// libFuzzer target: TF Serving's front ends (server/services/tfserving) over the example
// repository. The first byte picks the call and whether the model name is forced to the
// example's; the rest is what comes off the wire:
//   call 0: a tensorflow.serving.PredictRequest (TensorProto decoding, signature, filter);
//   call 1: a REST :predict body (JSON: instances and inputs, nesting, types);
//   call 2: a GetModelMetadataRequest, and GetModelStatus of its model spec;
//   call 3: a REST path, asked with GET and with POST (route parsing, status, metadata).

#include <cstddef>
#include <cstdint>
#include <string>

#include "server/services/tfserving/rest_routes.h"
#include "server/services/tfserving/tfserving_service.h"
#include "tests/fuzz/fuzz_server.h"

namespace {

using namespace rnnserve;
namespace ts = tensorflow::serving;

struct TfServing {
  explicit TfServing(const server::ModelRepository* repository)
      : prediction(repository, {}), models(repository, {}), rest(repository, {}) {}
  server::tfserving::PredictionService prediction;
  server::tfserving::ModelService models;
  server::tfserving::RestRoutes rest;
};

TfServing& Services() {
  static TfServing* services = new TfServing(fuzz::Server().repository.get());
  return *services;
}

void Rest(const std::string& method, const std::string& path, const std::string& body) {
  server::http::Request request{.method = method, .path = path, .body = body};
  server::auth::Access access;
  if (!Services().rest.Owns(request, &access)) return;
  std::promise<void> answered;
  Services().rest.Handle(request, [&answered](server::http::Response) { answered.set_value(); });
  answered.get_future().wait();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::optional<fuzz::RequestInput> in = fuzz::SplitInput(data, size);
  if (!in) return 0;
  TfServing& s = Services();
  const std::string& wire = in->wire;
  grpc::ServerContext context;
  switch (in->call) {
    case 0: {
      ts::PredictRequest request;
      if (!request.ParseFromString(wire)) return 0;
      if (in->force_model) request.mutable_model_spec()->set_name(fuzz::kModel);
      ts::PredictResponse response;
      (void)fuzz::CallAndWait(
          [&](auto* c) { return s.prediction.Predict(c, &request, &response); });
      break;
    }
    case 1:
      Rest("POST", in->force_model ? "/v1/models/waveform_lstm:predict" : "/v1/models/x:predict",
           wire);
      break;
    case 2: {
      ts::GetModelMetadataRequest request;
      if (!request.ParseFromString(wire)) return 0;
      if (in->force_model) request.mutable_model_spec()->set_name(fuzz::kModel);
      ts::GetModelMetadataResponse response;
      (void)s.prediction.GetModelMetadata(&context, &request, &response);
      ts::GetModelStatusRequest status_request;
      *status_request.mutable_model_spec() = request.model_spec();
      ts::GetModelStatusResponse status_response;
      (void)s.models.GetModelStatus(&context, &status_request, &status_response);
      break;
    }
    default:
      Rest("GET", wire, "");
      Rest("POST", wire, R"({"instances": [[[0.5, 1.0]]]})");
      break;
  }
  return 0;
}
