// server/services/health_service.h over real gRPC in this process: a loopback server with the
// service, called through a stub generated from proto/grpc/health/v1/health.proto.

#include "server/services/health_service.h"

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace rnnserve::server {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

class HealthServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto health = HealthService::Create({.watch_poll_ms = 10});
    ASSERT_TRUE(health.ok()) << health.status();
    health_ = std::move(*health);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(health_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_NE(port, 0);
    stub_ = Health::NewStub(
        grpc::CreateChannel(LoopbackAddress(port), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }
  static std::string LoopbackAddress(int port) { return "127.0.0.1:" + std::to_string(port); }

  grpc::Status Check(const std::string& service, HealthCheckResponse* response) {
    grpc::ClientContext ctx;
    HealthCheckRequest request;
    request.set_service(service);
    return stub_->Check(&ctx, request, response);
  }

  // Watches the server's status ("") and checks that the first answer is SERVING.
  std::unique_ptr<grpc::ClientReader<HealthCheckResponse>> WatchServer(grpc::ClientContext* ctx) {
    auto reader = stub_->Watch(ctx, HealthCheckRequest());
    HealthCheckResponse response;
    EXPECT_TRUE(reader->Read(&response));
    EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
    return reader;
  }

  std::unique_ptr<HealthService> health_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Health::Stub> stub_;
};

TEST(HealthServiceCreateTest, RejectsNonPositiveWatchPoll) {
  auto health = HealthService::Create({.watch_poll_ms = 0});
  ASSERT_FALSE(health.ok());
  EXPECT_EQ(health.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(health.status().message().find("watch_poll_ms must be positive; was 0"),
            std::string::npos)
      << health.status();
}

TEST_F(HealthServiceTest, ServerStartsNotServingUntilSet) {
  HealthCheckResponse response;
  ASSERT_TRUE(Check("", &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  health_->SetServingStatus(true);
  ASSERT_TRUE(Check("", &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
}

TEST_F(HealthServiceTest, CheckOfUnknownServiceIsNotFound) {
  HealthCheckResponse response;
  const grpc::Status s = Check("no.such.Service", &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(s.error_message().find("no.such.Service"), std::string::npos) << s.error_message();
}

TEST_F(HealthServiceTest, SetServingStatusAllChangesEveryRegisteredService) {
  health_->SetServingStatus("inference.GRPCInferenceService", true);
  health_->SetServingStatus("rnnserve.v1.RnnServe", false);
  HealthCheckResponse response;
  ASSERT_TRUE(Check("inference.GRPCInferenceService", &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  ASSERT_TRUE(Check("rnnserve.v1.RnnServe", &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  health_->SetServingStatus(true);
  for (const char* name : {"", "inference.GRPCInferenceService", "rnnserve.v1.RnnServe"}) {
    ASSERT_TRUE(Check(name, &response).ok()) << name;
    EXPECT_EQ(response.status(), HealthCheckResponse::SERVING) << name;
  }
}

TEST_F(HealthServiceTest, WatchSendsTheStatusThenEachChange) {
  health_->SetServingStatus(true);
  grpc::ClientContext ctx;
  auto reader = WatchServer(&ctx);
  HealthCheckResponse response;
  health_->SetServingStatus(false);
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  health_->SetServingStatus(true);
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  ctx.TryCancel();
  while (reader->Read(&response)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

// Readiness is set again after every model load (ModelRepository::Subscribe); a watcher hears
// only what changed.
TEST_F(HealthServiceTest, WatchSendsNothingWhenAStatusIsSetAgain) {
  health_->SetServingStatus("rnnserve.v1.RnnServe", true);
  health_->SetServingStatus(true);
  grpc::ClientContext ctx;
  auto reader = WatchServer(&ctx);
  health_->SetServingStatus(true);
  health_->SetServingStatus("rnnserve.v1.RnnServe", true);
  health_->SetServingStatus(false);
  HealthCheckResponse response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  ctx.TryCancel();
  while (reader->Read(&response)) {
  }
}

// Kubernetes' livenessProbe asks "liveness": a server that is not ready (a broken model, the
// drain) is still alive and must not be restarted.
TEST_F(HealthServiceTest, LivenessServesWhateverTheReadinessAndThroughShutdown) {
  HealthCheckResponse response;
  ASSERT_TRUE(Check("liveness", &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  health_->SetServingStatus(true);
  health_->SetServingStatus(false);
  ASSERT_TRUE(Check("liveness", &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  ASSERT_TRUE(Check("", &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  health_->SetServingStatus(true);
  health_->Shutdown();
  ASSERT_TRUE(Check("liveness", &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  ASSERT_TRUE(Check("", &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
}

TEST_F(HealthServiceTest, WatchOfUnknownServiceSendsServiceUnknownThenItsStatus) {
  grpc::ClientContext ctx;
  HealthCheckRequest request;
  request.set_service("later.Service");
  auto reader = stub_->Watch(&ctx, request);
  HealthCheckResponse response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVICE_UNKNOWN);
  health_->SetServingStatus("later.Service", true);
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  ctx.TryCancel();
  while (reader->Read(&response)) {
  }
}

TEST_F(HealthServiceTest, ShutdownEndsWatchWithNotServingAndIgnoresLaterChanges) {
  health_->SetServingStatus(true);
  grpc::ClientContext ctx;
  auto reader = WatchServer(&ctx);
  HealthCheckResponse response;
  health_->Shutdown();
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(reader->Read(&response));
  EXPECT_TRUE(reader->Finish().ok());

  health_->SetServingStatus(true);
  ASSERT_TRUE(Check("", &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
}

TEST_F(HealthServiceTest, WatchEndsWhenTheClientCancelsSoTheServerCanStop) {
  grpc::ClientContext ctx;
  HealthCheckRequest request;
  auto reader = stub_->Watch(&ctx, request);
  HealthCheckResponse response;
  ASSERT_TRUE(reader->Read(&response));
  ctx.TryCancel();
  while (reader->Read(&response)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // Shutdown without a deadline waits for every handler: it returns only if Watch has ended.
  server_->Shutdown();
  server_.reset();
}

}  // namespace
}  // namespace rnnserve::server
