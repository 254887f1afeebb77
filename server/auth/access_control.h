#pragma once

// Who may call which gRPC method: one table (kAccessTable, method -> role), checked in one
// place for every service the server registers.
//
// The check runs in a server interceptor, before any handler: it reads the call's
// `authorization` metadata and compares it with the table's role for the method
// (token_auth.h). gRPC's C++ interceptors cannot fail a call themselves, and its
// AuthMetadataProcessor runs only over TLS, so the interceptor leaves its verdict where the
// call's handler finds it: a handler's first line is `auth::Verdict(*context)`. A method that
// is not in the table is refused (PERMISSION_DENIED), so a new RPC is closed until the table
// names its role; tests/unit/access_control_test.cc checks that every method of every service
// the server registers is in the table.

#include <memory>
#include <optional>
#include <string_view>

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include "server/auth/token_auth.h"

namespace rnnserve::server::auth {

// The role a full method name ("/package.Service/Method") needs; nullopt when the table does
// not name it.
std::optional<Access> AccessOf(std::string_view full_method);

// The interceptor that checks each call against the table with `authorizer` (not owned, must
// outlive the server). Null, or an authorizer without tokens: every call is let in and no
// interceptor runs. One server per process enforces tokens.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> NewAccessInterceptor(
    const TokenAuthorizer* authorizer);

// For a handler: OK, or the UNAUTHENTICATED / PERMISSION_DENIED the interceptor found for the
// call. OK for every call when no interceptor enforces tokens.
grpc::Status Verdict(const grpc::ServerContextBase& context);

}  // namespace rnnserve::server::auth
