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
//
// Model control (admin: LoadModel, UnloadModel, the repository RPCs) is safe by default, as
// Triton's model-control mode NONE is: without admin tokens it is refused to callers beyond
// loopback (PERMISSION_DENIED saying what to configure); a local `rnnserve-cli load` works.
// With --admin-token-file, an admin token is needed from anywhere; --allow-remote-model-control
// opens it to every caller that passes the token check.

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

struct AccessOptions {
  const TokenAuthorizer* authorizer = nullptr;  // not owned; null: no tokens
  bool remote_model_control = false;            // --allow-remote-model-control
};

// The interceptor that checks each call against the table. Without tokens only model control
// is checked (where it comes from); every other call costs nothing. One server per process.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> NewAccessInterceptor(
    const AccessOptions& options);

// Whether a gRPC peer ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000", "unix:...") is this host.
bool IsLocalPeer(std::string_view peer);

// The verdict on model control (admin access) of a call from `peer` that passed the token
// check.
grpc::Status CheckModelControl(const AccessOptions& options, std::string_view peer);

// For a handler: OK, or the UNAUTHENTICATED / PERMISSION_DENIED the interceptor found for the
// call. Without tokens, OK for every call but refused model control.
grpc::Status Verdict(const grpc::ServerContextBase& context);

}  // namespace rnnserve::server::auth
