#pragma once

// The contract between the HTTP server (server/http/) and the REST front ends that answer on it
// (KServe v2 REST, TF Serving REST). The server parses a request, checks its size, its caller's
// token and the connection limits, and offers it to each Routes in turn; a front end that owns
// the path answers it, asynchronously, through `done`.

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/auth/token_auth.h"

namespace rnnserve::server::http {

struct Request {
  std::string method;                                        // "GET", "POST", ...
  std::string path;                                          // percent-decoded, without the query
  std::string query;                                         // after '?', as sent
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;    // owned by the server until `done` runs: views into it stay valid
  std::string caller;  // server/limits/caller_identity.h: token hash, else "peer:<address>"
  absl::Time deadline = absl::InfiniteFuture();
  // The first header named `name` (lower case), or empty.
  absl::string_view Header(absl::string_view name) const {
    for (const auto& [k, v] : headers) {
      if (k == name) return v;
    }
    return {};
  }
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

using Done = std::function<void(Response)>;

// One front end's routes.
class Routes {
 public:
  virtual ~Routes() = default;
  // What a request needs to be let in (the same roles as gRPC's, server/auth/token_auth.h), or
  // false when this front end does not own the path; the server answers 401/403 itself.
  virtual bool Owns(const Request& request, auth::Access* access) const = 0;
  // Answers a request Owns() took; `done` runs exactly once, on any thread.
  virtual void Handle(const Request& request, Done done) = 0;
};

}  // namespace rnnserve::server::http
