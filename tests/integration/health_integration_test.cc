// gRPC health checking (grpc.health.v1) on the real rnnserve binary: the whole server and both
// of its services report SERVING once the repository is loaded, and a Watch hears NOT_SERVING
// and ends when the server is told to stop; `rnnserve-cli health` (a container's HEALTHCHECK)
// exits 0 only for SERVING. Readiness (server/readiness.h): with a model that fails to load,
// gRPC health and KServe ServerReady agree on "not ready" (strict, the default) or "ready"
// (--strict-readiness=false), liveness stays up, and both follow unloads and loads.

#include <grpcpp/grpcpp.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "client/client.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
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

// A repository of the example model ("good") and a model whose file is not HDF5 ("broken").
class ReadinessIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = std::filesystem::temp_directory_path() /
            ("rnnserve_readiness_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(repo_);
    std::filesystem::create_directories(repo_ / "good");
    std::filesystem::copy(SourcePath("models/examples/waveform_lstm"), repo_ / "good",
                          std::filesystem::copy_options::recursive);
    std::filesystem::create_directories(repo_ / "broken" / "1");
    std::ofstream(repo_ / "broken" / "1" / "model.h5") << "this is not HDF5";
  }
  void TearDown() override {
    std::filesystem::remove_all(repo_);
    std::filesystem::remove(log_);
  }

  // The server on the repository, returned once its initial loads are done (its log says how
  // many models are ready), whatever its readiness.
  std::unique_ptr<ServerProcess> StartLoaded(const std::vector<std::string>& extra) {
    log_ = repo_.string() + ".log";
    std::vector<std::string> args = {"--log-level", "info"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto server = ServerProcess::Launch(repo_.string(), args, {}, log_.string());
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok()) return nullptr;
    for (int i = 0; i < 1200 && Log().find("model(s) ready from") == std::string::npos; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_NE(Log().find("1 model(s) ready from"), std::string::npos) << Log();
    return *std::move(server);
  }
  std::string Log() const {
    std::ifstream in(log_);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

  // Every health service ("" and both of the server's) answers `want`.
  static void ExpectHealth(const ServerProcess& server, HealthCheckResponse::ServingStatus want) {
    auto stub = HealthStub(server);
    for (const char* service : {"", "rnnserve.v1.RnnServe", "inference.GRPCInferenceService"}) {
      grpc::ClientContext ctx;
      HealthCheckRequest request;
      request.set_service(service);
      HealthCheckResponse response;
      const grpc::Status s = stub->Check(&ctx, request, &response);
      ASSERT_TRUE(s.ok()) << service << ": " << s.error_message();
      EXPECT_EQ(response.status(), want) << "service '" << service << "'";
    }
  }
  struct KServeProbes {
    bool live = false;
    bool ready = false;
  };
  static KServeProbes KServe(const ServerProcess& server) {
    auto stub = inference::GRPCInferenceService::NewStub(
        grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
    KServeProbes probes;
    {
      grpc::ClientContext ctx;
      inference::ServerLiveResponse response;
      EXPECT_TRUE(stub->ServerLive(&ctx, {}, &response).ok());
      probes.live = response.live();
    }
    grpc::ClientContext ctx;
    inference::ServerReadyResponse response;
    EXPECT_TRUE(stub->ServerReady(&ctx, {}, &response).ok());
    probes.ready = response.ready();
    return probes;
  }
  // Watches the whole server's health until it reports `want` (or 60 s pass).
  static bool WaitForHealth(const ServerProcess& server, HealthCheckResponse::ServingStatus want) {
    auto stub = HealthStub(server);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    auto reader = stub->Watch(&ctx, HealthCheckRequest());
    HealthCheckResponse response;
    while (reader->Read(&response)) {
      if (response.status() == want) {
        ctx.TryCancel();
        while (reader->Read(&response)) {
        }
        return true;
      }
    }
    return false;
  }
  static grpc::Status Admin(const ServerProcess& server, bool load, const std::string& name) {
    auto stub = v1::RnnServe::NewStub(
        grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    if (load) {
      v1::LoadModelRequest request;
      request.set_name(name);
      v1::LoadModelResponse response;
      return stub->LoadModel(&ctx, request, &response);
    }
    v1::UnloadModelRequest request;
    request.set_name(name);
    v1::UnloadModelResponse response;
    return stub->UnloadModel(&ctx, request, &response);
  }

  std::filesystem::path repo_;
  std::filesystem::path log_;
};

// A pod whose repository has a broken model must not become Ready: health (the Kubernetes
// readinessProbe's gRPC check, and rnnserve-cli health, the image's HEALTHCHECK) and KServe
// ServerReady both say not ready; ServerLive and the "liveness" health service say live; the
// good model serves.
TEST_F(ReadinessIntegrationTest, StrictReadinessWithABrokenModelIsNotReadyButLive) {
  auto server = StartLoaded({});
  ASSERT_NE(server, nullptr);
  ExpectHealth(*server, HealthCheckResponse::NOT_SERVING);
  const KServeProbes probes = KServe(*server);
  EXPECT_TRUE(probes.live);
  EXPECT_FALSE(probes.ready);
  std::string out;
  EXPECT_EQ(RunCommand({RNNSERVE_CLI_BIN, "health", "--address", server->address()}, &out), 1)
      << out;
  EXPECT_NE(out.find("NOT_SERVING"), std::string::npos) << out;
  // Liveness (the Kubernetes livenessProbe's service) stays up: restarting would fix nothing.
  EXPECT_EQ(RunCommand({RNNSERVE_CLI_BIN, "health", "--address", server->address(), "--service",
                        "liveness"},
                       &out),
            0)
      << out;
  EXPECT_EQ(out, "SERVING\n");
  EXPECT_NE(Log().find("not ready: model 'broken' is not loaded"), std::string::npos) << Log();
  client::RnnServeClient c({.server = server->address()});
  auto output = c.Predict("good", {{"", LoadNpy("tests/fixtures/example/input.npy")}}, {});
  EXPECT_TRUE(output.ok()) << output.status();
}

// Readiness follows the repository: unloading the broken model makes the server ready, asking
// for it again (it fails again) makes it not ready; health's Watch hears each change.
TEST_F(ReadinessIntegrationTest, StrictReadinessFollowsUnloadAndFailedLoad) {
  auto server = StartLoaded({});
  ASSERT_NE(server, nullptr);
  ASSERT_FALSE(KServe(*server).ready);
  const grpc::Status unloaded = Admin(*server, /*load=*/false, "broken");
  ASSERT_TRUE(unloaded.ok()) << unloaded.error_message();
  EXPECT_TRUE(WaitForHealth(*server, HealthCheckResponse::SERVING));
  ExpectHealth(*server, HealthCheckResponse::SERVING);
  EXPECT_TRUE(KServe(*server).ready);
  const grpc::Status loaded = Admin(*server, /*load=*/true, "broken");
  EXPECT_EQ(loaded.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << loaded.error_message();
  EXPECT_TRUE(WaitForHealth(*server, HealthCheckResponse::NOT_SERVING));
  ExpectHealth(*server, HealthCheckResponse::NOT_SERVING);
  const KServeProbes probes = KServe(*server);
  EXPECT_TRUE(probes.live);
  EXPECT_FALSE(probes.ready);
}

// --strict-readiness=false: ready once every model has been tried; health and KServe agree.
TEST_F(ReadinessIntegrationTest, RelaxedReadinessIsReadyWithABrokenModel) {
  auto server = StartLoaded({"--strict-readiness=false"});
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(WaitForHealth(*server, HealthCheckResponse::SERVING));
  ExpectHealth(*server, HealthCheckResponse::SERVING);
  const KServeProbes probes = KServe(*server);
  EXPECT_TRUE(probes.live);
  EXPECT_TRUE(probes.ready);
}

}  // namespace
}  // namespace rnnserve::testing
