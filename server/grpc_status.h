#pragma once

#include <grpcpp/server_context.h>
#include <grpcpp/support/server_callback.h>
#include <grpcpp/support/status.h>

#include <chrono>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "server/auth/access_control.h"
#include "server/client_text.h"
#include "server/limits/caller_identity.h"
#include "server/servable.h"

namespace rnnserve::server {

// absl's status codes and gRPC's share their numbering: ToGrpc casts one to the other.
inline constexpr bool SameCode(absl::StatusCode a, grpc::StatusCode g) {
  return static_cast<int>(a) == static_cast<int>(g);
}
static_assert(SameCode(absl::StatusCode::kOk, grpc::StatusCode::OK));
static_assert(SameCode(absl::StatusCode::kCancelled, grpc::StatusCode::CANCELLED));
static_assert(SameCode(absl::StatusCode::kUnknown, grpc::StatusCode::UNKNOWN));
static_assert(SameCode(absl::StatusCode::kInvalidArgument, grpc::StatusCode::INVALID_ARGUMENT));
static_assert(SameCode(absl::StatusCode::kDeadlineExceeded, grpc::StatusCode::DEADLINE_EXCEEDED));
static_assert(SameCode(absl::StatusCode::kNotFound, grpc::StatusCode::NOT_FOUND));
static_assert(SameCode(absl::StatusCode::kAlreadyExists, grpc::StatusCode::ALREADY_EXISTS));
static_assert(SameCode(absl::StatusCode::kPermissionDenied, grpc::StatusCode::PERMISSION_DENIED));
static_assert(SameCode(absl::StatusCode::kResourceExhausted, grpc::StatusCode::RESOURCE_EXHAUSTED));
static_assert(SameCode(absl::StatusCode::kFailedPrecondition,
                       grpc::StatusCode::FAILED_PRECONDITION));
static_assert(SameCode(absl::StatusCode::kAborted, grpc::StatusCode::ABORTED));
static_assert(SameCode(absl::StatusCode::kOutOfRange, grpc::StatusCode::OUT_OF_RANGE));
static_assert(SameCode(absl::StatusCode::kUnimplemented, grpc::StatusCode::UNIMPLEMENTED));
static_assert(SameCode(absl::StatusCode::kInternal, grpc::StatusCode::INTERNAL));
static_assert(SameCode(absl::StatusCode::kUnavailable, grpc::StatusCode::UNAVAILABLE));
static_assert(SameCode(absl::StatusCode::kDataLoss, grpc::StatusCode::DATA_LOSS));
static_assert(SameCode(absl::StatusCode::kUnauthenticated, grpc::StatusCode::UNAUTHENTICATED));

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

// The client's deadline (if it set one), its cancellation and who it is as the request's
// RunOptions. The context outlives the call that runs the request.
inline RunOptions RunOptionsFor(const grpc::ServerContextBase& context) {
  RunOptions options;
  options.cancelled = [&context] { return context.IsCancelled(); };
  options.caller = limits::CallerIdentity(context);  // its turn in the model's queue
  if (context.deadline() != std::chrono::system_clock::time_point::max()) {
    options.deadline = absl::FromChrono(context.deadline());
  }
  return options;
}

// The reactor of a callback unary handler, already finished with the access check's refusal
// when the caller may not call (auth/access_control.h): a handler starts with
//   const UnaryStart start(context);
//   if (start.refused()) return start.reactor();
// and fails with `return start.Fail(status);`.
class UnaryStart {
 public:
  explicit UnaryStart(grpc::CallbackServerContext* context) : reactor_(context->DefaultReactor()) {
    if (grpc::Status a = auth::Verdict(*context); !a.ok()) {
      reactor_->Finish(a);
      refused_ = true;
    }
  }
  bool refused() const { return refused_; }
  grpc::ServerUnaryReactor* reactor() const { return reactor_; }
  grpc::ServerUnaryReactor* Fail(const absl::Status& s) const {
    reactor_->Finish(ToGrpc(s));
    return reactor_;
  }

 private:
  grpc::ServerUnaryReactor* const reactor_;
  bool refused_ = false;
};

}  // namespace rnnserve::server
