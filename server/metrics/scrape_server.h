#pragma once

// The HTTP/1.1 server under /metrics: one thread, one epoll loop, every connection non-blocking,
// so that a client that connects and sends nothing, or trickles its request, costs a socket and
// a few hundred bytes but never a thread, and cannot delay anyone else's request.
//
// Behaviour:
//   - A connection must deliver its request head (request line and headers, at most
//     max_header_bytes) and take its answer within request_timeout_ms of being accepted; then
//     it is closed, whatever its state.
//   - At most max_connections are open at once. One more is accepted by closing the oldest
//     (the one nearest its deadline), so a flood of idle connections cannot lock a scraper out:
//     a scrape's request arrives with its connection and is answered before the flood gets
//     max_connections further ahead.
//   - Every request is answered with `Connection: close` and the connection then closed (no
//     keep-alive; Prometheus reconnects for each scrape). The handler runs on the loop's thread:
//     it must be quick (serialising a registry is). A request body is not read.
//   - Errors the server answers itself: 400 (no request line), 405 (not GET or HEAD), 431 (a
//     head over max_header_bytes); plain text.
// Not for the open internet: no TLS, no authentication.

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace rnnserve::server::metrics {

struct ScrapeRequest {
  std::string path;   // the target without its query, e.g. "/metrics"
  bool gzip = false;  // Accept-Encoding names gzip
};

struct ScrapeAnswer {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string content_encoding;  // empty: none
  std::string body;
};

struct ScrapeServerOptions {
  std::string host = "127.0.0.1";  // an IPv4 address or a host name; "0.0.0.0": every interface
  int port = 0;                    // 0: a free port, see ScrapeServer::port()
  int max_connections = 512;       // open at once; must be positive
  int request_timeout_ms = 5000;   // accept to answer sent; must be positive
  int max_header_bytes = 8192;     // request line and headers; must be positive
};

class ScrapeServer {
 public:
  using Handler = std::function<ScrapeAnswer(const ScrapeRequest&)>;
  // Binds and starts the loop. INVALID_ARGUMENT for bad options, UNAVAILABLE naming the
  // address when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<ScrapeServer>> Start(const ScrapeServerOptions& options,
                                                             Handler handler);
  virtual ~ScrapeServer() = default;  // stops the loop and closes every connection
  virtual int port() const = 0;
};

}  // namespace rnnserve::server::metrics
