// Access to the real server: TLS, mutual TLS, bearer tokens and admin tokens, open health
// probes, and the bind addresses. Certificates are made by the openssl command in the suite's
// set-up: a CA, a server certificate for 127.0.0.1, a client certificate it signed, and one
// signed by another CA.

#include <google/protobuf/descriptor.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "rnnserve/v1/rnnserve.grpc.pb.h"
#include "tensorflow_serving/apis/model_service.grpc.pb.h"
#include "tensorflow_serving/apis/prediction_service.grpc.pb.h"
#include "tests/integration/server_process.h"
#include "tests/support/fixtures.h"
#include "tests/support/tfserving_services.h"

namespace rnnserve::testing {
namespace {

namespace fs = std::filesystem;

constexpr char kInferenceToken[] = "inference-token-0123456789";
constexpr char kAdminToken[] = "admin-token-9876543210";

// Runs a shell command; false when it fails (its output is then printed).
bool Shell(const std::string& command) {
  std::string out;
  const int rc = RunCommand({"/bin/sh", "-c", command}, &out);
  if (rc != 0) std::fprintf(stderr, "%s\n-> %d: %s\n", command.c_str(), rc, out.c_str());
  return rc == 0;
}

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Makes `name`.key/.pem signed by the CA `ca` (ca.pem/ca.key) with the given subjectAltName.
bool MakeCert(const fs::path& dir, const std::string& name, const std::string& ca,
              const std::string& san) {
  const std::string d = dir.string() + "/";
  std::ofstream(d + name + ".ext") << "subjectAltName=" << san << "\n";
  return Shell(absl::StrCat("cd ", d,
                            " && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
                            "-nodes -keyout ",
                            name, ".key -out ", name, ".csr -subj /CN=", name,
                            " 2>/dev/null && openssl x509 -req -in ", name, ".csr -CA ", ca,
                            ".pem -CAkey ", ca, ".key -CAcreateserial -days 2 -out ", name,
                            ".pem -extfile ", name, ".ext 2>/dev/null"));
}

bool MakeCa(const fs::path& dir, const std::string& name) {
  return Shell(absl::StrCat("cd ", dir.string(),
                            " && openssl req -x509 -newkey ec -pkeyopt "
                            "ec_paramgen_curve:prime256v1 -nodes -keyout ",
                            name, ".key -out ", name, ".pem -days 2 -subj /CN=", name,
                            " 2>/dev/null"));
}

class SecureServerTest : public ServerSuite<> {
 protected:
  static void SetUpTestSuite() {
    dir_ =
        new fs::path(fs::temp_directory_path() / ("rnnserve_security_" + std::to_string(getpid())));
    fs::create_directories(*dir_);
    if (!MakeCa(*dir_, "ca") || !MakeCa(*dir_, "other_ca") ||
        !MakeCert(*dir_, "server", "ca", "DNS:localhost,IP:127.0.0.1") ||
        !MakeCert(*dir_, "client", "ca", "DNS:client") ||
        !MakeCert(*dir_, "stranger", "other_ca", "DNS:stranger")) {
      return;  // SetUp fails each test: the server did not start
    }
    std::ofstream(*dir_ / "inference_tokens.txt") << "\n  first-unused-token  \n"
                                                  << kInferenceToken << "\n";
    std::ofstream(*dir_ / "admin_tokens.txt") << kAdminToken << "\n";
    StartServer(SourcePath("models/examples"),
                {"--tls-cert", Path("server.pem"), "--tls-key", Path("server.key"),
                 "--tls-client-ca", Path("ca.pem"), "--auth-token-file",
                 Path("inference_tokens.txt"), "--admin-token-file", Path("admin_tokens.txt")},
                Options(kInferenceToken));
  }
  static void TearDownTestSuite() {
    ServerSuite::TearDownTestSuite();
    std::error_code ec;
    fs::remove_all(*dir_, ec);
    delete dir_;
  }
  static std::string Path(const std::string& name) { return (*dir_ / name).string(); }

  // TLS with the CA and the client certificate `cert` ("" for none), and `token`.
  static client::ClientOptions Options(const std::string& token, const std::string& cert = "client",
                                       const std::string& ca = "ca") {
    client::ClientOptions o;
    o.tls_root_certs = ReadAll(*dir_ / (ca + ".pem"));
    if (!cert.empty()) {
      o.tls_cert_chain = ReadAll(*dir_ / (cert + ".pem"));
      o.tls_private_key = ReadAll(*dir_ / (cert + ".key"));
    }
    o.token = token;
    o.timeout_ms = 10000;
    return o;
  }
  client::RnnServeClient Client(client::ClientOptions o) {
    o.server = server()->address();
    return client::RnnServeClient(o);
  }
  absl::StatusCode ListCode(const client::ClientOptions& o) {
    return Client(o).List().status().code();
  }

  static fs::path* dir_;
};
fs::path* SecureServerTest::dir_ = nullptr;

TEST_F(SecureServerTest, ClientWithTheCaItsCertificateAndAnInferenceTokenGetsKerasNumbers) {
  auto c = Client(Options(kInferenceToken));
  const client::NpyArray input = LoadNpy("tests/fixtures/example/input.npy");
  const client::NpyArray expected = LoadNpy("tests/fixtures/example/expected.npy");
  auto resp = c.Predict("waveform_lstm", {{"", input}}, {});
  ASSERT_TRUE(resp.ok()) << resp.status();
  const client::NpyArray got = client::ToArray(resp->outputs().at("probabilities"));
  ASSERT_EQ(got.values.size(), expected.values.size());
  for (size_t i = 0; i < got.values.size(); ++i) {
    EXPECT_NEAR(got.values[i], expected.values[i], 1e-6 + 1e-5 * std::fabs(expected.values[i]));
  }
}

TEST_F(SecureServerTest, PlaintextClientIsRefused) {
  client::ClientOptions plain;
  plain.token = kInferenceToken;
  plain.timeout_ms = 5000;
  EXPECT_EQ(ListCode(plain), absl::StatusCode::kUnavailable);
}

TEST_F(SecureServerTest, ClientWithoutACertificateIsRefused) {
  EXPECT_EQ(ListCode(Options(kInferenceToken, /*cert=*/"")), absl::StatusCode::kUnavailable);
}

TEST_F(SecureServerTest, ClientCertificateSignedByAnotherCaIsRefused) {
  EXPECT_EQ(ListCode(Options(kInferenceToken, "stranger")), absl::StatusCode::kUnavailable);
}

TEST_F(SecureServerTest, MissingOrUnknownTokenIsUnauthenticatedWithTheSameMessage) {
  auto none = Client(Options("")).List();
  auto wrong = Client(Options("not-a-token")).List();
  auto prefix = Client(Options(std::string(kInferenceToken).substr(0, 10))).List();
  ASSERT_EQ(none.status().code(), absl::StatusCode::kUnauthenticated) << none.status();
  EXPECT_EQ(wrong.status(), none.status());
  EXPECT_EQ(prefix.status(), none.status());
  // The message says nothing of the token given.
  EXPECT_EQ(wrong.status().message().find("not-a-token"), std::string::npos);
}

TEST_F(SecureServerTest, AdminTokenIsAcceptedForInference) {
  EXPECT_EQ(ListCode(Options(kAdminToken)), absl::StatusCode::kOk);
}

TEST_F(SecureServerTest, InferenceTokenCannotUnloadAndTheModelStaysServed) {
  auto c = Client(Options(kInferenceToken));
  const absl::Status s = c.Unload("waveform_lstm");
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_EQ(c.Load("waveform_lstm").status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(c.Metadata("waveform_lstm").ok());
}

TEST_F(SecureServerTest, AdminTokenUnloadsAndLoads) {
  auto admin = Client(Options(kAdminToken));
  ASSERT_TRUE(admin.Unload("waveform_lstm").ok());
  EXPECT_EQ(admin.Metadata("waveform_lstm").status().code(), absl::StatusCode::kNotFound);
  auto loaded = admin.Load("waveform_lstm");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(admin.Metadata("waveform_lstm").ok());
}

TEST_F(SecureServerTest, KServeCallsNeedATokenAndItsProbesDoNot) {
  client::ClientOptions o = Options("");
  auto channel = grpc::CreateChannel(server()->address(), client::ChannelCredentials(o));
  auto stub = inference::GRPCInferenceService::NewStub(channel);
  {
    grpc::ClientContext ctx;
    inference::ServerLiveResponse live;
    EXPECT_TRUE(stub->ServerLive(&ctx, {}, &live).ok());
  }
  {
    grpc::ClientContext ctx;
    inference::ModelMetadataRequest req;
    req.set_name("waveform_lstm");
    inference::ModelMetadataResponse resp;
    EXPECT_EQ(stub->ModelMetadata(&ctx, req, &resp).error_code(), grpc::UNAUTHENTICATED);
  }
  {
    o.token = kInferenceToken;
    auto ctx = client::NewContext(o);
    inference::ModelMetadataRequest req;
    req.set_name("waveform_lstm");
    inference::ModelMetadataResponse resp;
    EXPECT_TRUE(stub->ModelMetadata(ctx.get(), req, &resp).ok());
  }
}

// A KServe sequence belongs to the token that started it.
TEST_F(SecureServerTest, KServeSequenceOfAnotherTokenCannotBeContinuedOrRestarted) {
  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel(server()->address(), client::ChannelCredentials(Options(""))));
  const client::NpyArray x = LoadNpy("tests/fixtures/example/input.npy");
  const auto call = [&](const std::string& token, bool start, bool end) {
    inference::ModelInferRequest req;
    req.set_model_name("waveform_lstm");
    auto* in = req.add_inputs();
    in->set_name("waveform");
    in->set_datatype("FP32");
    for (int64_t d : {1, 20, 2}) in->add_shape(d);
    for (int i = 0; i < 40; ++i) in->mutable_contents()->add_fp32_contents(x.values[i]);
    (*req.mutable_parameters())["sequence_id"].set_int64_param(4242);
    (*req.mutable_parameters())["sequence_start"].set_bool_param(start);
    (*req.mutable_parameters())["sequence_end"].set_bool_param(end);
    auto ctx = client::NewContext(Options(token));
    inference::ModelInferResponse resp;
    return stub->ModelInfer(ctx.get(), req, &resp).error_code();
  };
  // Two valid inference tokens: two clients.
  ASSERT_EQ(call(kInferenceToken, true, false), grpc::StatusCode::OK);
  // Another caller's live sequence answers as one that is not live, and cannot be restarted.
  EXPECT_EQ(call("first-unused-token", false, false), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(call("first-unused-token", true, false), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(call(kInferenceToken, false, true), grpc::StatusCode::OK);
}

// Every method of every API (rnnserve.v1, KServe, TF Serving), called by name with an empty
// message, so that a method added later without a token check fails here: without a token each
// is UNAUTHENTICATED but the KServe probes; with an inference token only LoadModel,
// UnloadModel and TF Serving's HandleReloadConfigRequest are PERMISSION_DENIED.
TEST_F(SecureServerTest, EveryMethodOfEveryApiButTheProbesNeedsATokenAndOnlyAdminOnesAnAdminToken) {
  const auto call = [&](const std::string& method, const std::string& token) {
    client::ClientOptions o = Options(token);
    auto channel = grpc::CreateChannel(server()->address(), client::ChannelCredentials(o));
    grpc::GenericStub stub(channel);
    auto ctx = client::NewContext(o);
    grpc::Slice empty("");
    const grpc::ByteBuffer request(&empty, 1);
    grpc::ByteBuffer response;
    std::promise<grpc::Status> done;
    stub.UnaryCall(ctx.get(), method, grpc::StubOptions(), &request, &response,
                   [&done](grpc::Status s) { done.set_value(std::move(s)); });
    return done.get_future().get().error_code();
  };
  int methods = 0;
  for (const std::string service :
       {v1::RnnServe::service_full_name(), inference::GRPCInferenceService::service_full_name(),
        tensorflow::serving::PredictionService::service_full_name(),
        tensorflow::serving::ModelService::service_full_name()}) {
    const auto* d =
        service.rfind("tensorflow.serving.", 0) == 0
            ? TfServingService(service.c_str())
            : google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service);
    ASSERT_NE(d, nullptr) << service;
    for (int i = 0; i < d->method_count(); ++i, ++methods) {
      const std::string name = d->method(i)->name();
      const std::string method = absl::StrCat("/", service, "/", name);
      const bool probe = name == "ServerLive" || name == "ServerReady";
      const bool admin = name == "LoadModel" || name == "UnloadModel" ||
                         name == "RepositoryModelLoad" || name == "RepositoryModelUnload" ||
                         name == "HandleReloadConfigRequest" || name == "TraceSetting" ||
                         name == "LogSettings";
      const grpc::StatusCode without = call(method, "");
      if (probe) {
        EXPECT_NE(without, grpc::UNAUTHENTICATED) << method;
      } else {
        EXPECT_EQ(without, grpc::UNAUTHENTICATED) << method;
      }
      const grpc::StatusCode with_inference = call(method, kInferenceToken);
      if (admin) {
        EXPECT_EQ(with_inference, grpc::PERMISSION_DENIED) << method;
      } else {
        EXPECT_NE(with_inference, grpc::UNAUTHENTICATED) << method;
        EXPECT_NE(with_inference, grpc::PERMISSION_DENIED) << method;
      }
    }
  }
  EXPECT_GE(methods, 25);
}

TEST_F(SecureServerTest, HealthAnswersWithoutAToken) {
  auto channel = grpc::CreateChannel(server()->address(), client::ChannelCredentials(Options("")));
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext ctx;
  grpc::health::v1::HealthCheckResponse resp;
  ASSERT_TRUE(stub->Check(&ctx, {}, &resp).ok());
  EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

TEST_F(SecureServerTest, CliTakesTheTlsFilesAndTheTokenFile) {
  std::ofstream(*dir_ / "cli_token.txt") << kInferenceToken << "\n";
  const std::vector<std::string> base = {
      RNNSERVE_CLI_BIN, "list",       "--server",         server()->address(), "--tls-ca",
      Path("ca.pem"),   "--tls-cert", Path("client.pem"), "--tls-key",         Path("client.key")};
  std::string out;
  std::vector<std::string> with_token = base;
  with_token.insert(with_token.end(), {"--token-file", Path("cli_token.txt")});
  EXPECT_EQ(RunCommand(with_token, &out), 0) << out;
  EXPECT_NE(out.find("waveform_lstm"), std::string::npos) << out;
  EXPECT_NE(RunCommand(base, &out), 0);
  EXPECT_NE(out.find("UNAUTHENTICATED"), std::string::npos) << out;
}

TEST(ServerStartTest, UnreadableTlsFileOrTokenFileStopsTheStartNamingTheFlag) {
  std::string out;
  EXPECT_EQ(RunCommand({RNNSERVE_BIN, "--port", "0", "--tls-cert", "/nonexistent/cert.pem",
                        "--tls-key", "/nonexistent/key.pem"},
                       &out),
            2);
  EXPECT_NE(out.find("--tls-cert"), std::string::npos) << out;
  EXPECT_EQ(RunCommand({RNNSERVE_BIN, "--port", "0", "--auth-token-file", "/nonexistent/t"}, &out),
            2);
  EXPECT_NE(out.find("token file"), std::string::npos) << out;
}

TEST(ServerStartTest, MetricsListenOnTheirOwnAddress) {
  const int metrics_port = FreeLoopbackPort();
  auto s = ServerProcess::Start(
      SourcePath("models/examples"),
      {"--metrics-port", std::to_string(metrics_port), "--metrics-address", "127.0.0.2"});
  ASSERT_TRUE(s.ok()) << s.status();
  std::string out;
  // curl is not needed: bash's /dev/tcp opens the connection or fails.
  const auto open = [&](const std::string& host) {
    return RunCommand(
               {"/bin/bash", "-c", absl::StrCat("exec 3<>/dev/tcp/", host, "/", metrics_port)},
               &out) == 0;
  };
  EXPECT_TRUE(open("127.0.0.2"));
  EXPECT_FALSE(open("127.0.0.1"));
}

TEST(ServerStartTest, GrpcListensOnItsOwnAddressAndNotOnLoopbacksOthers) {
  // ServerProcess probes 127.0.0.1, so this server is started and probed by a script: it waits
  // until 127.0.0.2:<port> accepts, then checks 127.0.0.1:<port> does not.
  const int port = FreeLoopbackPort();
  const std::string p = std::to_string(port);
  std::string out;
  const int rc = RunCommand(
      {"/bin/bash", "-c",
       absl::StrCat(
           RNNSERVE_BIN, " --model-repository ", SourcePath("models/examples"),
           " --address 127.0.0.2 --port ", p, " --metrics-port 0 --http-port 0 & pid=$!; up=1; ",
           "for i in $(seq 300); do if (: <>/dev/tcp/127.0.0.2/", p,
           ") 2>/dev/null; then up=0; break; fi; sleep 0.1; done; ", "(: <>/dev/tcp/127.0.0.1/", p,
           ") 2>/dev/null; other=$?; ", "kill $pid; wait $pid; echo up=$up other=$other; ",
           "[ $up = 0 ] && [ $other != 0 ]")},
      &out);
  EXPECT_EQ(rc, 0) << out;
}

}  // namespace
}  // namespace rnnserve::testing
