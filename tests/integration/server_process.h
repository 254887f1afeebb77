#pragma once

// Starts the real rnnserve binary on a free loopback port for an integration test, and stops it
// with SIGTERM.

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/client.h"
#include "gtest/gtest.h"

namespace rnnserve::testing {

// A port nothing listens on right now (bound once to port 0, then released).
int FreeLoopbackPort();

class ServerProcess {
 public:
  // Runs `rnnserve --model-repository <repo> --port <free> --metrics-port 0 --http-port 0
  // <extra...>` and waits (up to 60 s) until it is ready: gRPC health of the whole server SERVING
  // (its initial loads are done) to a client with `probe`'s TLS. `log_file`: where the server's
  // stderr goes (empty: the test's stderr).
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(
      const std::string& repo, const std::vector<std::string>& extra = {},
      const client::ClientOptions& probe = {}, const std::string& log_file = "");
  // Start() that returns as soon as the server answers ListModels, loaded or not.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Launch(
      const std::string& repo, const std::vector<std::string>& extra = {},
      const client::ClientOptions& probe = {}, const std::string& log_file = "");
  // The server's gRPC health ("" : the whole server) is SERVING.
  bool Serving(const client::ClientOptions& probe = {}) const;
  ~ServerProcess();

  std::string address() const;
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  bool Alive();
  // Sends SIGTERM and waits; returns the exit code (or 128 + signal).
  int Stop();
  // Sends SIGTERM and returns at once (Stop() then waits for the exit).
  void Terminate();

 private:
  ServerProcess(pid_t pid, int port) : pid_(pid), port_(port) {}
  pid_t pid_;
  bool terminated_ = false;  // SIGTERM sent: Stop() only waits (a second one forces the exit)
  const int port_;
};

// The shared fixture of the integration tests: one rnnserve process for a whole test suite,
// started by the suite's SetUpTestSuite and stopped after its last test.
//
//   class PredictTest : public ServerSuite<> {
//    protected:
//     static void SetUpTestSuite() { StartServer(SourcePath("models/examples")); }
//   };
//   TEST_F(PredictTest, ...) { ... server()->address() ... }
//
// Base is the gtest fixture to extend (::testing::TestWithParam<T> for parameterised suites).
// A suite whose server did not start fails each of its tests in SetUp, naming the reason. A
// suite that needs a server per test (its tests change server-held state that others would
// see) calls ServerProcess::Start itself.
template <typename Base = ::testing::Test>
class ServerSuite : public Base {
 public:
  static void TearDownTestSuite() {
    Slot().reset();
    StartError() = "StartServer was not called";
  }

 protected:
  // From SetUpTestSuite: the server on `repo` with `extra` flags (ServerProcess::Start).
  static void StartServer(const std::string& repo, const std::vector<std::string>& extra = {},
                          const client::ClientOptions& probe = {}) {
    auto s = ServerProcess::Start(repo, extra, probe);
    if (s.ok()) {
      Slot() = std::move(*s);
    } else {
      StartError() = std::string(s.status().message());
    }
  }
  void SetUp() override {
    ASSERT_NE(Slot(), nullptr) << "the suite's rnnserve did not start: " << StartError();
  }
  static ServerProcess* server() { return Slot().get(); }

 private:
  static std::unique_ptr<ServerProcess>& Slot() {
    static std::unique_ptr<ServerProcess> server;
    return server;
  }
  static std::string& StartError() {
    static std::string error = "StartServer was not called";
    return error;
  }
};

// Runs a command, returns its exit code; stdout and stderr go to *out.
int RunCommand(const std::vector<std::string>& argv, std::string* out);

}  // namespace rnnserve::testing
