#pragma once

// A real redis-server (Debian's package) for the tests of the Redis state store: started on a
// free loopback port in a temporary directory, without persistence, and killed at the end.
// Tests skip, naming the reason, where the binary is absent (deploy/install_deps.sh installs
// it).

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace rnnserve::testing {

class RedisServer {
 public:
  // redis-server from PATH or /usr/bin; empty when there is none.
  static std::string Binary();
  // Starts it (port 0: a free one) and waits until it answers (up to 10 s). `password`:
  // requirepass (empty: none).
  // `append_only`: every write is in an append-only file (fsync always), which Restart keeps.
  static absl::StatusOr<std::unique_ptr<RedisServer>> Start(int port = 0,
                                                            const std::string& password = "",
                                                            bool append_only = false);
  ~RedisServer();

  int port() const { return port_; }
  std::string url() const;  // redis://127.0.0.1:<port>
  // SIGKILL and wait; Start(port()) brings a new, empty one back on the same port.
  void Kill();
  // SIGTERM (Redis saves and exits), then the same server again on the same port and
  // directory: with append_only, with every write it had.
  absl::Status Restart();

 private:
  RedisServer(int port, std::string dir, std::string password, bool append_only)
      : port_(port), dir_(dir), password_(password), append_only_(append_only) {}
  // Runs redis-server and waits until it answers.
  absl::Status Run();
  pid_t pid_ = 0;
  const int port_;
  const std::string dir_;
  const std::string password_;
  const bool append_only_;
};

}  // namespace rnnserve::testing
