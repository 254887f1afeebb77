// libFuzzer target: the KServe v2 request path (ModelInfer with raw and typed contents,
// parameters, requested outputs and stateful sequences; ModelMetadata, ModelConfig,
// ModelReady). The first byte picks the call and whether the model name is forced to the
// example's; the rest is the request as it comes off the wire.

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
    case 0:
    case 1: {
      inference::ModelInferRequest request;
      if (!request.ParseFromString(wire)) return 0;
      if (force_model) request.set_model_name(fuzz::kModel);
      inference::ModelInferResponse response;
      (void)fuzz::CallAndWait(
          [&](auto* c) { return s.kserve->ModelInfer(c, &request, &response); });
      break;
    }
    case 2: {
      inference::ModelMetadataRequest request;
      if (!request.ParseFromString(wire)) return 0;
      if (force_model) request.set_name(fuzz::kModel);
      inference::ModelMetadataResponse response;
      (void)s.kserve->ModelMetadata(&context, &request, &response);
      inference::ModelConfigRequest config_request;
      config_request.set_name(request.name());
      config_request.set_version(request.version());
      inference::ModelConfigResponse config_response;
      (void)s.kserve->ModelConfig(&context, &config_request, &config_response);
      break;
    }
    default: {
      inference::ModelReadyRequest request;
      if (!request.ParseFromString(wire)) return 0;
      if (force_model) request.set_name(fuzz::kModel);
      inference::ModelReadyResponse response;
      (void)s.kserve->ModelReady(&context, &request, &response);
      break;
    }
  }
  return 0;
}
