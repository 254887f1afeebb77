#pragma once

// Starts the real rnnserve binary on a free loopback port for an integration test, and stops it
// with SIGTERM.

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace rnnserve::testing {

// A port nothing listens on right now (bound once to port 0, then released).
int FreeLoopbackPort();

class ServerProcess {
 public:
  // Runs `rnnserve --model-repository <repo> --port <free> --metrics-port 0 <extra...>` and waits
  // (up to 60 s) until it answers ListModels.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(
      const std::string& repo, const std::vector<std::string>& extra = {});
  ~ServerProcess();

  std::string address() const;
  int port() const { return port_; }
  bool Alive();
  // Sends SIGTERM and waits; returns the exit code (or 128 + signal).
  int Stop();

 private:
  ServerProcess(pid_t pid, int port) : pid_(pid), port_(port) {}
  pid_t pid_;
  const int port_;
};

// Runs a command, returns its exit code; stdout and stderr go to *out.
int RunCommand(const std::vector<std::string>& argv, std::string* out);

}  // namespace rnnserve::testing
