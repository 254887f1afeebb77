#pragma once

// The fixture of the scale-out tests: two rnnserve replicas sharing one real redis-server
// (--sequence-store, with an append-only file), bearer tokens for two callers, and a KServe
// sequence chunk of the example fixture sent to a replica or a proxy. Skips, naming the
// reason, without redis-server.

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "server/store/redis_client.h"
#include "tests/integration/server_process.h"
#include "tests/support/fixtures.h"
#include "tests/support/redis_server.h"

namespace rnnserve::testing {

using inference::GRPCInferenceService;
using inference::ModelInferRequest;
using inference::ModelInferResponse;

inline constexpr char kAlice[] = "alice-token-0123456789";
inline constexpr char kBob[] = "bob-token-9876543210";

class ScaleOutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (RedisServer::Binary().empty()) {
      GTEST_SKIP() << "redis-server is not installed (deploy/install_deps.sh installs it)";
    }
    // With an append-only file, as a deployment that must survive a Redis restart runs it.
    auto redis = RedisServer::Start(0, "", /*append_only=*/true);
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = std::move(*redis);
    dir_ = ::testing::TempDir() + "/scale_out_" + std::to_string(getpid());
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ + "/tokens") << kAlice << "\n" << kBob << "\n";
    flags_ = {"--sequence-store",           redis_->url(), "--auth-token-file", dir_ + "/tokens",
              "--max-concurrent-per-model", "64"};
    for (const std::string& f : ExtraFlags()) flags_.push_back(f);
    // The example model, and the same file batched step by step (cellular_batching): a
    // sequence resumed from the store takes a slot like any other.
    repo_ = dir_ + "/models";
    const std::filesystem::path repo = repo_;
    std::filesystem::create_directories(repo / "waveform_cellular" / "1");
    std::filesystem::copy(SourcePath("models/examples/waveform_lstm"), repo / "waveform_lstm",
                          std::filesystem::copy_options::recursive);
    std::filesystem::copy_file(SourcePath("models/examples/waveform_lstm/1/model.h5"),
                               repo / "waveform_cellular" / "1" / "model.h5");
    std::ofstream(repo / "waveform_cellular" / "config.pbtxt")
        << "name: \"waveform_cellular\"\nplatform: \"keras_h5\"\nmax_batch_size: 8\n"
           "input { name: \"waveform\" data_type: TYPE_FP32 dims: [ -1, 2 ] }\n"
           "output { name: \"probabilities\" data_type: TYPE_FP32 dims: [ 3 ] }\n"
           "instance_group { kind: KIND_CPU count: 1 }\n"
           "cellular_batching { max_active_sequences: 8 chunk_steps: 4 }\n";
    for (auto [replica, metrics_port] :
         {std::pair{&a_, &a_metrics_}, std::pair{&b_, &b_metrics_}}) {
      *metrics_port = FreeLoopbackPort();
      std::vector<std::string> flags = flags_;
      flags.insert(flags.end(), {"--metrics-port", std::to_string(*metrics_port)});
      auto s = ServerProcess::Start(repo.string(), flags, {.token = kAlice});
      ASSERT_TRUE(s.ok()) << s.status();
      *replica = std::move(*s);
    }
    x_ = LoadNpy("tests/fixtures/example/input.npy");
    want_ = LoadNpy("tests/fixtures/example/expected.npy");
  }
  void TearDown() override {
    a_.reset();
    b_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Flags every replica gets after the fixture's own.
  virtual std::vector<std::string> ExtraFlags() const { return {}; }

  // The value of a counter without labels on a replica's /metrics; -1 when it is not there.
  static double Counter(int metrics_port, const std::string& name) {
    std::string text;
    RunCommand({"curl", "-s", "http://127.0.0.1:" + std::to_string(metrics_port) + "/metrics"},
               &text);
    const size_t at = text.find("\n" + name + " ");
    if (at == std::string::npos) return -1;
    return std::stod(text.substr(at + name.size() + 2));
  }

  // Steps [t0, t1) of fixture sequence b as one chunk of KServe sequence `id`, sent to
  // `replica` as `token` with the x-sequence-id header a proxy hashes on.
  grpc::Status Chunk(const ServerProcess& replica, const char* token, int64_t id, int b, int64_t t0,
                     int64_t t1, bool start, bool end, ModelInferResponse* resp) {
    return Chunk(replica.address(), token, id, b, t0, t1, start, end, resp);
  }
  // The same to a proxy's (or any) address.
  grpc::Status Chunk(const std::string& address, const char* token, int64_t id, int b, int64_t t0,
                     int64_t t1, bool start, bool end, ModelInferResponse* resp,
                     const std::string& model = "waveform_lstm",
                     const std::string& string_id = "") {
    const int64_t T = x_.shape[1], F = x_.shape[2];
    ModelInferRequest req;
    req.set_model_name(model);
    auto* in = req.add_inputs();
    in->set_name("waveform");
    in->set_datatype("FP32");
    for (int64_t d : {int64_t{1}, t1 - t0, F}) in->add_shape(d);
    for (int64_t i = (b * T + t0) * F; i < (b * T + t1) * F; ++i) {
      in->mutable_contents()->add_fp32_contents(static_cast<float>(x_.values[i]));
    }
    if (string_id.empty()) {
      (*req.mutable_parameters())["sequence_id"].set_int64_param(id);
    } else {
      (*req.mutable_parameters())["sequence_id"].set_string_param(string_id);
    }
    (*req.mutable_parameters())["sequence_start"].set_bool_param(start);
    (*req.mutable_parameters())["sequence_end"].set_bool_param(end);
    // A new channel per chunk: nothing ties a chunk to a connection, only to its token.
    auto stub = GRPCInferenceService::NewStub(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", std::string("Bearer ") + token);
    ctx.AddMetadata("x-sequence-id", string_id.empty() ? std::to_string(id) : string_id);
    return stub->ModelInfer(&ctx, req, resp);
  }

  void ExpectKeras(const ModelInferResponse& resp, int b) {
    ASSERT_EQ(resp.raw_output_contents_size(), 1);
    std::vector<float> got(3);
    ASSERT_EQ(resp.raw_output_contents(0).size(), 3 * sizeof(float));
    std::memcpy(got.data(), resp.raw_output_contents(0).data(), 3 * sizeof(float));
    for (int c = 0; c < 3; ++c) {
      const double w = want_.values[b * 3 + c];
      EXPECT_NEAR(got[c], w, 1e-5 + 1e-5 * std::fabs(w)) << "sequence " << b << " class " << c;
    }
  }

  std::unique_ptr<RedisServer> redis_;
  std::string dir_;
  std::string repo_;                // the models every replica serves
  std::vector<std::string> flags_;  // every replica's: the store, the tokens
  std::unique_ptr<ServerProcess> a_, b_;
  int a_metrics_ = 0, b_metrics_ = 0;  // their /metrics ports
  client::NpyArray x_, want_;
};

}  // namespace rnnserve::testing
