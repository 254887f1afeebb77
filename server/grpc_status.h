#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace rnnserve::server {

// absl::Status -> grpc::Status; the codes share their numbering.
inline grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

}  // namespace rnnserve::server
