#pragma once

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include <chrono>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "server/client_text.h"
#include "server/servable.h"

namespace rnnserve::server {

// absl::Status -> grpc::Status; the codes share their numbering. The message is cut to what a
// client can receive (client_text.h).
inline grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(
      static_cast<grpc::StatusCode>(s.code()),
      BoundedErrorMessage(std::string_view(s.message().data(), s.message().size())));
}

// Whether a request failed through the server's fault (INTERNAL, UNKNOWN, DATA_LOSS,
// UNAVAILABLE: worth an ERROR line) rather than the client's (a malformed request, a model
// that cannot do what was asked, a deadline, a full queue: the client is told, nothing is
// logged above debug).
inline bool IsServerFault(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kUnavailable:
      return true;
    default:
      return false;
  }
}

// The client's deadline (if it set one) and its cancellation as the request's RunOptions. The
// context outlives the call that runs the request.
inline RunOptions RunOptionsFor(const grpc::ServerContextBase& context) {
  RunOptions options;
  options.cancelled = [&context] { return context.IsCancelled(); };
  if (context.deadline() != std::chrono::system_clock::time_point::max()) {
    options.deadline = absl::FromChrono(context.deadline());
  }
  return options;
}

}  // namespace rnnserve::server
