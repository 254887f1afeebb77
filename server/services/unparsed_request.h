#pragma once

// A gRPC server interceptor for requests that are not the message their method takes.
//
// gRPC parses a unary request before any handler runs; when the bytes do not parse it fails
// the call itself with an empty message and UNIMPLEMENTED (callback API: rnnserve.v1, KServe)
// or INTERNAL (synchronous API: TF Serving), which tells the client nothing true. This interceptor
// sees that the request could not be parsed (its POST_RECV_MESSAGE hook gets no message) and turns
// that answer into INVALID_ARGUMENT naming the method and what was wrong. Calls whose request
// parsed are left alone, as are other codes. Register it first, so that the metrics interceptor
// counts the code the client gets.

#include <grpcpp/support/server_interceptor.h>

#include <memory>

namespace rnnserve::server {

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
NewUnparsedRequestInterceptor();

}  // namespace rnnserve::server
