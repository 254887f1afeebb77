// gRPC health checking (grpc.health.v1) on the real rnnserve binary: the whole server and both
// of its services report SERVING once the repository is loaded, and a Watch hears NOT_SERVING
// and ends when the server is told to stop; `rnnserve-cli health` (a container's HEALTHCHECK)
// exits 0 only for SERVING.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "client/client.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/integration/server_process.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

std::unique_ptr<Health::Stub> HealthStub(const ServerProcess& server) {
  return Health::NewStub(grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
}

TEST(HealthIntegrationTest, ServerAndItsServicesAreServing) {
  auto server = ServerProcess::Start(SourcePath("models/examples"));
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = HealthStub(**server);
  for (const char* service : {"", "rnnserve.v1.RnnServe", "inference.GRPCInferenceService"}) {
    grpc::ClientContext ctx;
    HealthCheckRequest request;
    request.set_service(service);
    HealthCheckResponse response;
    const grpc::Status s = stub->Check(&ctx, request, &response);
    ASSERT_TRUE(s.ok()) << service << ": " << s.error_message();
    EXPECT_EQ(response.status(), HealthCheckResponse::SERVING) << service;
  }
  grpc::ClientContext ctx;
  HealthCheckRequest request;
  request.set_service("no.such.Service");
  HealthCheckResponse response;
  EXPECT_EQ(stub->Check(&ctx, request, &response).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST(HealthIntegrationTest, WatchHearsNotServingWhenTheServerStops) {
  // With a drain, as servers run by default (--drain-seconds=5). Without one the server cancels
  // every call the moment the watchers have returned, and gRPC sends a watcher's OK only after
  // Watch returns: on a slow machine (under ThreadSanitizer) the client got CANCELLED.
  auto server = ServerProcess::Start(SourcePath("models/examples"), {"--drain-seconds=1"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = HealthStub(**server);
  auto ctx = std::make_unique<grpc::ClientContext>();
  auto reader = stub->Watch(ctx.get(), HealthCheckRequest());
  HealthCheckResponse response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  // The client reads while the server stops, as a watching client does, then closes its
  // channel: a synchronous C++ client polls its connection only inside a call, and a server
  // that closes gracefully waits for the client to answer its last ping.
  std::vector<HealthCheckResponse::ServingStatus> heard;
  grpc::Status finished;
  std::thread watcher([&] {
    HealthCheckResponse r;
    while (reader->Read(&r)) heard.push_back(r.status());
    finished = reader->Finish();
    reader.reset();
    ctx.reset();
    stub.reset();
  });
  EXPECT_EQ((*server)->Stop(), 0);
  watcher.join();
  EXPECT_EQ(heard,
            std::vector<HealthCheckResponse::ServingStatus>{HealthCheckResponse::NOT_SERVING});
  EXPECT_TRUE(finished.ok()) << finished.error_message();
}

// On SIGTERM, health answers NOT_SERVING for --drain-seconds while requests are still served,
// so that a load balancer takes the server out before its listener closes.
TEST(HealthIntegrationTest, SigtermDrainsWithNotServingWhileStillServing) {
  auto server = ServerProcess::Start(SourcePath("models/examples"), {"--drain-seconds", "3"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = HealthStub(**server);
  client::RnnServeClient c({.server = (*server)->address()});
  const client::NpyArray input = LoadNpy("tests/fixtures/example/input.npy");
  const absl::Time signalled = absl::Now();
  (*server)->Terminate();
  HealthCheckResponse::ServingStatus status = HealthCheckResponse::SERVING;
  while (status == HealthCheckResponse::SERVING && absl::Now() - signalled < absl::Seconds(2)) {
    grpc::ClientContext ctx;
    HealthCheckResponse response;
    ASSERT_TRUE(stub->Check(&ctx, HealthCheckRequest(), &response).ok());
    status = response.status();
  }
  EXPECT_EQ(status, HealthCheckResponse::NOT_SERVING);
  auto during = c.Predict("waveform_lstm", {{"", input}}, {});
  EXPECT_TRUE(during.ok()) << during.status();  // still served while draining
  EXPECT_LT(absl::Now() - signalled, absl::Seconds(3));
  EXPECT_EQ((*server)->Stop(), 0);
  EXPECT_GE(absl::Now() - signalled, absl::Seconds(3));
}

TEST(HealthIntegrationTest, CliHealthExitsZeroOnlyWhenServing) {
  auto server = ServerProcess::Start(SourcePath("models/examples"));
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = (*server)->address();
  std::string log;
  EXPECT_EQ(RunCommand({RNNSERVE_CLI_BIN, "health", "--address", address}, &log), 0) << log;
  EXPECT_EQ(log, "SERVING\n");
  EXPECT_EQ(RunCommand({RNNSERVE_CLI_BIN, "health", "--server", address, "--service",
                        "rnnserve.v1.RnnServe"},
                       &log),
            0)
      << log;
  EXPECT_EQ(
      RunCommand({RNNSERVE_CLI_BIN, "health", "--address", address, "--service", "no.such.Service"},
                 &log),
      1);
  EXPECT_NE(log.find("NOT_FOUND"), std::string::npos) << log;
  const std::string nobody = "127.0.0.1:" + std::to_string(FreeLoopbackPort());
  EXPECT_EQ(RunCommand({RNNSERVE_CLI_BIN, "health", "--address", nobody}, &log), 1);
  EXPECT_NE(log.find("UNAVAILABLE"), std::string::npos) << log;
}

}  // namespace
}  // namespace rnnserve::testing
