#pragma once

// What the request-path fuzz targets serve: the example model repository (models/examples) in
// a ModelRepository, the rnnserve.v1 and KServe services over it, and stateful sequences. Made
// once per process and never destroyed (libFuzzer calls the target millions of times).
// The services are called directly with a grpc::ServerContext of no call, as the gRPC thread
// would after decoding; no limits, tokens or metrics.

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "server/model_repository.h"
#include "server/sequence_manager.h"
#include "server/services/kserve/kserve_service.h"
#include "server/services/rnnserve_service.h"
#include "tests/support/callback_call.h"

namespace rnnserve::fuzz {

struct FuzzServer {
  FuzzServer();
  std::unique_ptr<server::ModelRepository> repository;
  std::unique_ptr<server::SequenceManager> sequences;
  std::unique_ptr<server::RnnServeService> service;
  std::unique_ptr<server::kserve::KServeService> kserve;
};

// The process's FuzzServer.
FuzzServer& Server();

// The example model's name: requests whose selector asks for it get it, so mutations reach
// past the model lookup.
inline constexpr char kModel[] = "waveform_lstm";

// A request target's input: byte 0 picks the call (low two bits) and whether the model name is
// forced to kModel (bit 2); the rest is the request as it comes off the wire.
struct RequestInput {
  int call = 0;
  bool force_model = false;
  std::string wire;
};
inline std::optional<RequestInput> SplitInput(const uint8_t* data, size_t size) {
  if (size < 1) return std::nullopt;
  return RequestInput{.call = data[0] % 4,
                      .force_model = (data[0] & 0x4) != 0,
                      .wire = std::string(reinterpret_cast<const char*>(data) + 1, size - 1)};
}

// Calls a callback-API unary handler and waits for its answer (tests/support/callback_call.h).
using ::rnnserve::testing::CallAndWait;

}  // namespace rnnserve::fuzz
