#pragma once

// The /metrics HTTP endpoint: prometheus-cpp's pull exposer (civetweb) serving ServerMetrics.
//
//   GET /metrics -> 200, the text exposition format (Content-Type: text/plain), gzip when the
//                   client accepts it; rnnserve's families, process_* and the exposer's own
//                   exposer_* families. Other paths: 404.
//
// Each connection holds one of `threads` civetweb workers until its request has arrived or
// `request_timeout_ms` has passed. So up to threads - 1 clients that connect and send nothing
// (or trickle one byte every few seconds) do not delay a scrape at all; more than that delay
// it by at most request_timeout_ms per `threads` of them. Not for the open internet: no TLS,
// no authentication (bind it to a private interface).

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/exposer.h"
#include "server/metrics/server_metrics.h"

namespace rnnserve::server::metrics {

struct EndpointOptions {
  // An IPv4 address or a host name; "0.0.0.0" for every interface. IPv6 is refused: Debian's
  // civetweb is built without it.
  std::string host = "127.0.0.1";
  int port = 8502;                // 0: a free port, see prometheus::Exposer::GetListeningPorts()
  int threads = 16;               // civetweb workers; must be positive
  int request_timeout_ms = 5000;  // to receive a request's headers; must be positive
};

// Binds and starts serving `metrics` (which must outlive the exposer). Fails, naming the
// address, when it cannot be bound; InvalidArgument for a bad option.
absl::StatusOr<std::unique_ptr<prometheus::Exposer>> StartEndpoint(const ServerMetrics& metrics,
                                                                   const EndpointOptions& options);

}  // namespace rnnserve::server::metrics
