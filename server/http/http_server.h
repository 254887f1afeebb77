#pragma once

// The HTTP/1.1 server of the REST front ends (route.h), on cpp-httplib (docs/architecture.md,
// "HTTP", says why this library).
//
// Behaviour, in the order a request meets it:
//   - Connections: at most Options::max_connections are served at once, each on a thread of
//     its own, and as many more wait, accepted but unread, for a free thread; beyond that no
//     connection is accepted (the kernel's backlog holds them, then refuses), so the server
//     holds at most 2 * max_connections + 1 client sockets (one in the accept loop's hand). A
//     connection that sends nothing for read_timeout_s while a request is being read, or idles that
//     long between keep-alive requests, is closed. (A client that trickles a byte per
//     read_timeout_s holds its thread; max_connections bounds how many can.) TCP_NODELAY; listen
//     backlog SOMAXCONN.
//   - TLS and mutual TLS from the same files as gRPC (auth/tls.h).
//   - Routing: the first Routes whose Owns() takes the request; none is 404.
//   - Access: the route's auth::Access checked against `Authorization: Bearer <token>` with
//     the same TokenAuthorizer as gRPC, before the body is read: 401 UNAUTHENTICATED, 403
//     PERMISSION_DENIED; model control from beyond loopback as gRPC's (auth::CheckModelControl).
//   - Body: a Content-Length over max_body_bytes is 413 before the body is read; the body's
//     bytes are reserved in the byte budget (limits/byte_budget.h) before it is read and held
//     until the answer is sent; over the budget is 429 RESOURCE_EXHAUSTED.
// Every error the server itself answers is JSON, {"error": "<message>"}.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/auth/access_control.h"
#include "server/auth/tls.h"
#include "server/auth/token_auth.h"
#include "server/http/route.h"
#include "server/limits/byte_budget.h"

namespace rnnserve::server::http {

struct HttpServerOptions {
  std::string address = "127.0.0.1";
  int port = 8501;       // 0: any free port (port() tells which)
  auth::TlsOptions tls;  // empty cert_file: plaintext
  // Not owned, must outlive the server; null: no token needed, no budget.
  const auth::TokenAuthorizer* authorizer = nullptr;
  limits::ByteBudget* bytes = nullptr;
  // Model control (routes that need auth::Access::kAdmin) from beyond loopback, as on gRPC
  // (auth/access_control.h): open with admin tokens or this; else PERMISSION_DENIED.
  bool remote_model_control = false;
  int64_t max_body_bytes = 64 << 20;  // larger bodies are 413; must be positive
  int max_connections = 256;          // served at once (threads); must be positive
  int read_timeout_s = 30;            // a read, or keep-alive idling, that waits longer closes
};

// The JSON error body every front end answers with: {"error": "<message>"}.
std::string ErrorJson(absl::string_view message);
// The HTTP status for a failed request's code (400, 401, 403, 404, 409, 429, 500, 501, 503,
// 504) and the Response that carries it.
int HttpStatus(absl::StatusCode code);
Response ErrorResponse(const absl::Status& status);

class HttpServer {
 public:
  // Binds the port and starts serving `routes` (not owned; they must outlive the server).
  // INVALID_ARGUMENT for bad options or TLS files; UNAVAILABLE when the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                           std::vector<Routes*> routes);
  virtual ~HttpServer() = default;
  virtual int port() const = 0;
  // Stops accepting and returns once the listener thread has ended.
  virtual void Stop() = 0;
};

}  // namespace rnnserve::server::http
