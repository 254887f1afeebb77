// libFuzzer target: KServe v2 REST bodies (server/services/kserve/rest_codec.h) through the
// REST routes to the example model, as the HTTP server hands them over. Byte 0 picks the
// endpoint (low two bits: infer, infer on version 1, model ready, repository index) and
// whether bytes 1-2 are an Inference-Header-Content-Length (bit 2, little-endian); the rest is
// the body.

#include <cstddef>
#include <cstdint>
#include <future>
#include <string>

#include "server/services/kserve/rest_routes.h"
#include "tests/fuzz/fuzz_server.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rnnserve;
  if (size < 3) return 0;
  static server::kserve::KServeRoutes routes(fuzz::Server().kserve.get());
  static const char* const kPaths[] = {"/v2/models/waveform_lstm/infer",
                                       "/v2/models/waveform_lstm/versions/1/infer",
                                       "/v2/models/waveform_lstm/ready", "/v2/repository/index"};
  server::http::Request request{
      .method = (data[0] & 3) == 2 ? "GET" : "POST",
      .path = kPaths[data[0] & 3],
      .body = std::string(reinterpret_cast<const char*>(data) + 3, size - 3),
      .caller = "peer:fuzz"};
  if ((data[0] & 4) != 0) {
    request.headers.emplace_back("inference-header-content-length",
                                 std::to_string(data[1] | (data[2] << 8)));
  }
  server::auth::Access access;
  if (!routes.Owns(request, &access)) return 0;
  std::promise<void> answered;
  routes.Handle(request, [&answered](server::http::Response) { answered.set_value(); });
  answered.get_future().wait();
  return 0;
}
