#pragma once

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include <chrono>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "server/servable.h"

namespace rnnserve::server {

// absl::Status -> grpc::Status; the codes share their numbering.
inline grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

// The client's deadline (if it set one) as the request's RunOptions.
inline RunOptions RunOptionsFor(const grpc::ServerContext& context) {
  RunOptions options;
  if (context.deadline() != std::chrono::system_clock::time_point::max()) {
    options.deadline = absl::FromChrono(context.deadline());
  }
  return options;
}

}  // namespace rnnserve::server
