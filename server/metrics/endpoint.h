#pragma once

// The /metrics HTTP endpoint: ServerMetrics in the text exposition format, served by a
// one-thread event loop (scrape_server.h).
//
//   GET /metrics -> 200, the text exposition format 0.0.4 (Content-Type: text/plain), gzip when
//                   the client accepts it; rnnserve's families, process_* and the endpoint's
//                   own exposer_* families (as prometheus-cpp's exposer names them). HEAD: the
//                   same head. Other paths: 404.
//
// Clients that connect and send nothing, or trickle their request, hold a socket, not a
// thread: a scrape is answered as soon as its request has arrived, with up to max_connections
// - 1 such clients open; beyond that the oldest connection is closed to make room, and each is
// closed request_timeout_ms after it was accepted. (docs/metrics.md says why not civetweb.)
// Not for the open internet: no TLS, no authentication (bind it to a private interface).

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/collectable.h"
#include "server/metrics/server_metrics.h"

namespace rnnserve::server::metrics {

struct EndpointOptions {
  // An IPv4 address or a host name; "0.0.0.0" for every interface. IPv6 is refused.
  std::string host = "127.0.0.1";
  int port = 8502;                // 0: a free port, see Endpoint::port()
  int max_connections = 512;      // open at once; must be positive
  int request_timeout_ms = 5000;  // from accept to the answer sent; must be positive
};

class Endpoint {
 public:
  virtual ~Endpoint() = default;  // stops serving
  virtual int port() const = 0;   // the bound port
  // One more source for every scrape from now on; safe while serving.
  virtual void RegisterCollectable(std::shared_ptr<prometheus::Collectable> c) = 0;
};

// Binds and starts serving `metrics` (which must outlive the endpoint). UNAVAILABLE, naming the
// address, when it cannot be bound; INVALID_ARGUMENT for a bad option.
absl::StatusOr<std::unique_ptr<Endpoint>> StartEndpoint(const ServerMetrics& metrics,
                                                        const EndpointOptions& options);

}  // namespace rnnserve::server::metrics
