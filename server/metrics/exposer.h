#pragma once

// A minimal HTTP/1.1 endpoint that serves a Registry for Prometheus to scrape.
//
//   GET /metrics  -> 200, Content-Type: text/plain; version=0.0.4; charset=utf-8
//   HEAD /metrics -> the same headers, no body
//   GET /         -> 200, a short HTML page linking to /metrics
//   other paths   -> 404; other methods -> 405
//
// One thread accepts and answers one connection at a time and closes it after the response
// (`Connection: close`); a scrape is a few kilobytes, so this is plenty for Prometheus and a
// few curl users. A client that sends nothing is dropped after `read_timeout_ms`. Not for the
// open internet: no TLS, no authentication (bind it to a private interface).

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "server/metrics/registry.h"

namespace rnnserve::server::metrics {

struct ExposerOptions {
  std::string host = "127.0.0.1";  // a name or address; "0.0.0.0" for every interface
  int port = 8502;                 // 0: a free port, see Exposer::port()
  int read_timeout_ms = 5000;      // must be positive
};

class Exposer {
 public:
  // Binds and starts the serving thread. Fails when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<Exposer>> Start(const Registry* registry,
                                                        const ExposerOptions& options);
  // Stops the thread and closes the socket.
  ~Exposer();

  int port() const { return port_; }

 private:
  Exposer(const Registry* registry, int listen_fd, int wake_fd_read, int wake_fd_write, int port,
          int read_timeout_ms);
  void Serve();
  void Answer(int fd) const;

  const Registry* const registry_;
  const int listen_fd_;
  const int wake_read_;  // a pipe the destructor writes to, waking poll()
  const int wake_write_;
  const int port_;
  const int read_timeout_ms_;
  std::thread thread_;
};

}  // namespace rnnserve::server::metrics
