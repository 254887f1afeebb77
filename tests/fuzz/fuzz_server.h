#pragma once

// What the request-path fuzz targets serve: the example model repository (models/examples) in
// a ModelRepository, the rnnserve.v1 and KServe services over it, and stateful sequences. Made
// once per process and never destroyed (libFuzzer calls the target millions of times).
// The services are called directly with a grpc::ServerContext of no call, as the gRPC thread
// would after decoding; no limits, tokens or metrics.

#include <grpcpp/grpcpp.h>

#include <memory>

#include "server/model_repository.h"
#include "server/sequence_manager.h"
#include "server/services/kserve/kserve_service.h"
#include "server/services/kserve_sequences.h"
#include "server/services/rnnserve_service.h"

namespace rnnserve::fuzz {

struct FuzzServer {
  FuzzServer();
  std::unique_ptr<server::ModelRepository> repository;
  std::unique_ptr<server::SequenceManager> sequences;
  std::unique_ptr<server::ManagedSequences> kserve_sequences;
  std::unique_ptr<server::RnnServeService> service;
  std::unique_ptr<server::kserve::KServeService> kserve;
};

// The process's FuzzServer.
FuzzServer& Server();

// The example model's name: requests whose selector asks for it get it, so mutations reach
// past the model lookup.
inline constexpr char kModel[] = "waveform_lstm";

}  // namespace rnnserve::fuzz
