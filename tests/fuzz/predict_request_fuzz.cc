// libFuzzer target: the rnnserve.v1 request path. The first byte picks the call and whether the
// model name is forced to the example's (so mutations reach validation and the engine); the
// rest is the request as it comes off the wire. Every request is answered, with a status;
// never a crash, a leak or undefined behaviour, and the server keeps serving.

#include <cstddef>
#include <cstdint>
#include <string>

#include "tests/fuzz/fuzz_server.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rnnserve;
  const std::optional<fuzz::RequestInput> in = fuzz::SplitInput(data, size);
  if (!in) return 0;
  fuzz::FuzzServer& s = fuzz::Server();
  const std::string& wire = in->wire;
  const bool force_model = in->force_model;
  grpc::ServerContext context;
  switch (in->call) {
    case 0: {
      v1::PredictRequest request;
      if (!request.ParseFromString(wire)) return 0;
      if (force_model) request.mutable_model_spec()->set_name(fuzz::kModel);
      v1::PredictResponse response;
      (void)fuzz::CallAndWait([&](auto* c) { return s.service->Predict(c, &request, &response); });
      break;
    }
    case 1: {
      v1::EvaluateRequest request;
      if (!request.ParseFromString(wire)) return 0;
      if (force_model) request.mutable_model_spec()->set_name(fuzz::kModel);
      v1::EvaluateResponse response;
      (void)s.service->Evaluate(&context, &request, &response);
      break;
    }
    case 2: {
      v1::ModelMetadataRequest request;
      if (!request.ParseFromString(wire)) return 0;
      if (force_model) request.mutable_model_spec()->set_name(fuzz::kModel);
      v1::ModelMetadataResponse response;
      (void)s.service->ModelMetadata(&context, &request, &response);
      break;
    }
    default: {
      v1::ListModelsRequest request;
      if (!request.ParseFromString(wire)) return 0;
      v1::ListModelsResponse response;
      (void)s.service->ListModels(&context, &request, &response);
      break;
    }
  }
  return 0;
}
