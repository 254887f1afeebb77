#pragma once

// The process's bounded resources, built once from the flags (docs/security.md "Bounded
// resources"): the request byte budget, the per-model concurrency cap, the stream cap and
// idle close, the Generate cap and idle close (each shared fairly among callers:
// fair_share.h), and gRPC's thread cap.

#include <memory>

#include <grpcpp/server_builder.h>

#include "absl/status/statusor.h"
#include "server/flags.h"
#include "server/limits/admission.h"
#include "server/limits/stream_limits.h"

namespace rnnserve::server::limits {

struct ServerLimits {
  std::unique_ptr<ByteBudget> bytes;
  std::unique_ptr<ModelConcurrency> concurrency;
  std::unique_ptr<StreamLimits> streams;
  std::unique_ptr<StreamLimits> generations;  // Generate calls (--max-generations)
  RequestLimits requests() const {
    return {.bytes = bytes.get(), .concurrency = concurrency.get()};
  }
};

absl::StatusOr<ServerLimits> CreateServerLimits(const ServerFlags& flags);

// Caps gRPC's server threads (pollers and calls) at --grpc-max-threads through a
// grpc::ResourceQuota; a call that finds no thread is RESOURCE_EXHAUSTED from gRPC. With
// --grpc-memory-bytes, the same quota bounds the memory of gRPC's transports.
void LimitThreads(const ServerFlags& flags, grpc::ServerBuilder* builder);

}  // namespace rnnserve::server::limits
