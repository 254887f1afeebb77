// Two rnnserve replicas sharing one real redis-server (--sequence-store): a KServe sequence
// moves between them chunk by chunk, survives the SIGKILL of the replica that served it, and
// still equals Keras on the whole sequence; another caller cannot continue it on either
// replica. Skips, naming the reason, without redis-server.

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "server/store/redis_client.h"
#include "tests/integration/server_process.h"
#include "tests/support/fixtures.h"
#include "tests/support/redis_server.h"

namespace rnnserve::testing {
namespace {

using inference::GRPCInferenceService;
using inference::ModelInferRequest;
using inference::ModelInferResponse;

constexpr char kAlice[] = "alice-token-0123456789";
constexpr char kBob[] = "bob-token-9876543210";

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
    for (auto* replica : {&a_, &b_}) {
      auto s = ServerProcess::Start(repo.string(), flags_, {.token = kAlice});
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
  client::NpyArray x_, want_;
};

// The fixture's sequences (lengths 40, 25, 12) in chunks of 7 steps, each chunk on the other
// replica than the one before: every chunk but the first is continued from the store, and a
// replica's own copy from two chunks ago is never used.
TEST_F(ScaleOutTest, ChunksAlternatingBetweenReplicasEqualKerasOnTheWholeSequence) {
  const std::vector<int64_t> lengths = {40, 25, 12};
  for (int b = 0; b < 3; ++b) {
    ModelInferResponse resp;
    int chunk = 0;
    for (int64_t t0 = 0; t0 < lengths[b]; t0 += 7, ++chunk) {
      const int64_t t1 = std::min(t0 + 7, lengths[b]);
      const ServerProcess& replica = chunk % 2 == 0 ? *a_ : *b_;
      const grpc::Status s =
          Chunk(replica, kAlice, 100 + b, b, t0, t1, t0 == 0, t1 == lengths[b], &resp);
      ASSERT_TRUE(s.ok()) << "sequence " << b << " chunk " << chunk << ": " << s.error_message();
    }
    ExpectKeras(resp, b);
  }
}

// A string sequence id names the same sequence on every replica.
TEST_F(ScaleOutTest, StringSequenceIdMovesBetweenReplicas) {
  ModelInferResponse resp;
  int chunk = 0;
  for (int64_t t0 = 0; t0 < 25; t0 += 7, ++chunk) {
    const int64_t t1 = std::min<int64_t>(t0 + 7, 25);
    const grpc::Status s = Chunk((chunk % 2 == 0 ? *a_ : *b_).address(), kAlice, 0, 1, t0, t1,
                                 t0 == 0, t1 == 25, &resp, "waveform_lstm", "user-7");
    ASSERT_TRUE(s.ok()) << "chunk " << chunk << ": " << s.error_message();
  }
  ExpectKeras(resp, 1);
}

TEST_F(ScaleOutTest, SequenceContinuesOnTheOtherReplicaAfterItsReplicaIsKilled) {
  ModelInferResponse resp;
  for (int64_t t0 = 0; t0 < 21; t0 += 7) {
    ASSERT_TRUE(Chunk(*a_, kAlice, 7, 0, t0, t0 + 7, t0 == 0, false, &resp).ok());
  }
  ASSERT_EQ(kill(a_->pid(), SIGKILL), 0);
  for (int64_t t0 = 21; t0 < 40; t0 += 7) {
    const int64_t t1 = std::min<int64_t>(t0 + 7, 40);
    const grpc::Status s = Chunk(*b_, kAlice, 7, 0, t0, t1, false, t1 == 40, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  ExpectKeras(resp, 0);
}

TEST_F(ScaleOutTest, AnotherCallerCannotContinueTheSequenceOnEitherReplica) {
  ModelInferResponse resp;
  ASSERT_TRUE(Chunk(*a_, kAlice, 9, 0, 0, 7, true, false, &resp).ok());
  for (const ServerProcess* replica : {a_.get(), b_.get()}) {
    const grpc::Status s = Chunk(*replica, kBob, 9, 0, 7, 14, false, false, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
    const grpc::Status restart = Chunk(*replica, kBob, 9, 0, 0, 7, true, false, &resp);
    EXPECT_EQ(restart.error_code(), grpc::StatusCode::PERMISSION_DENIED) << restart.error_message();
  }
  // Alice's sequence is untouched by Bob's tries: it ends equal to Keras.
  for (int64_t t0 = 7; t0 < 40; t0 += 7) {
    const int64_t t1 = std::min<int64_t>(t0 + 7, 40);
    ASSERT_TRUE(Chunk(*b_, kAlice, 9, 0, t0, t1, false, t1 == 40, &resp).ok());
  }
  ExpectKeras(resp, 0);
}

// Redis restarted mid-sequence (its append-only file kept): the sequence goes on, on either
// replica, with Keras's numbers.
TEST_F(ScaleOutTest, SequenceGoesOnAfterRedisRestartsWithItsAppendOnlyFile) {
  ModelInferResponse resp;
  ASSERT_TRUE(Chunk(*a_, kAlice, 13, 0, 0, 14, true, false, &resp).ok());
  ASSERT_TRUE(redis_->Restart().ok());
  ASSERT_TRUE(Chunk(*b_, kAlice, 13, 0, 14, 28, false, false, &resp).ok());
  const grpc::Status s = Chunk(*a_, kAlice, 13, 0, 28, 40, false, true, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ExpectKeras(resp, 0);
}

TEST_F(ScaleOutTest, StoreDownIsUnavailableWithItsAddressAndServingResumesWhenItIsBack) {
  ModelInferResponse resp;
  ASSERT_TRUE(Chunk(*a_, kAlice, 11, 0, 0, 7, true, false, &resp).ok());
  redis_->Kill();
  const grpc::Status down = Chunk(*b_, kAlice, 11, 0, 7, 14, false, false, &resp);
  EXPECT_EQ(down.error_code(), grpc::StatusCode::UNAVAILABLE) << down.error_message();
  EXPECT_NE(down.error_message().find(redis_->url()), std::string::npos) << down.error_message();
  auto back = RedisServer::Start(redis_->port());
  ASSERT_TRUE(back.ok()) << back.status();
  redis_ = std::move(*back);
  // The restarted Redis kept nothing (no persistence in this test): a new sequence runs.
  ASSERT_TRUE(Chunk(*b_, kAlice, 12, 0, 0, 40, true, true, &resp).ok());
  ExpectKeras(resp, 0);
}

TEST_F(ScaleOutTest, StepLevelBatchedModelContinuesAcrossReplicas) {
  const std::vector<int64_t> lengths = {40, 25, 12};
  for (int b = 0; b < 3; ++b) {
    ModelInferResponse resp;
    int chunk = 0;
    for (int64_t t0 = 0; t0 < lengths[b]; t0 += 9, ++chunk) {
      const int64_t t1 = std::min(t0 + 9, lengths[b]);
      const grpc::Status s = Chunk((chunk % 2 == 0 ? *a_ : *b_).address(), kAlice, 400 + b, b, t0,
                                   t1, t0 == 0, t1 == lengths[b], &resp, "waveform_cellular");
      ASSERT_TRUE(s.ok()) << "sequence " << b << " chunk " << chunk << ": " << s.error_message();
    }
    ExpectKeras(resp, b);
  }
}

// A replica stopped with SIGTERM (it drains) mid-sequence: the sequence continues on the other.
TEST_F(ScaleOutTest, SequenceContinuesOnTheOtherReplicaAfterItsReplicaIsStopped) {
  ModelInferResponse resp;
  ASSERT_TRUE(Chunk(*a_, kAlice, 8, 0, 0, 20, true, false, &resp).ok());
  a_->Stop();
  const grpc::Status s = Chunk(*b_, kAlice, 8, 0, 20, 40, false, true, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ExpectKeras(resp, 0);
}

// StreamPredict on a replica with the Redis store: the stream's sequences equal Keras, and
// they leave Redis when the stream ends (a stream owns its sequences).
TEST_F(ScaleOutTest, StreamPredictWithTheRedisStoreEqualsKerasAndCleansUp) {
  client::RnnServeClient c({.server = a_->address(), .token = kAlice});
  std::vector<v1::StreamPredictResponse> last(3);
  const absl::Status s = c.StreamSequences(
      "waveform_lstm", x_, 7, {40, 25, 12}, 300,
      [&](int64_t b, int64_t, const v1::StreamPredictResponse& r) { last[b] = r; });
  ASSERT_TRUE(s.ok()) << s;
  for (int b = 0; b < 3; ++b) {
    const client::NpyArray got = client::ToArray(last[b].outputs().at("probabilities"));
    for (int k = 0; k < 3; ++k) {
      const double w = want_.values[b * 3 + k];
      EXPECT_NEAR(got.values[k], w, 1e-5 + 1e-5 * std::fabs(w)) << "sequence " << b;
    }
  }
  auto endpoint = server::store::ParseRedisUrl(redis_->url());
  ASSERT_TRUE(endpoint.ok());
  auto redis = server::store::RedisClient::Create({.endpoint = *endpoint});
  ASSERT_TRUE(redis.ok());
  auto keys = (*redis)->Command({"KEYS", "rnnserve:seq:*"});
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_TRUE(keys->elements.empty()) << keys->elements.size() << " sequences left in Redis";
}

// A store the server cannot use as told stops the start, naming why: a URL of another form,
// a password Redis refuses (the password itself never printed).
TEST(ScaleOutStartTest, BadStoreUrlOrRefusedPasswordStopsTheStart) {
  std::string out;
  EXPECT_NE(RunCommand({RNNSERVE_BIN, "--model-repository", SourcePath("models/examples"), "--port",
                        "0", "--metrics-port", "0", "--sequence-store", "redis://nohost"},
                       &out),
            0);
  EXPECT_NE(out.find("--sequence-store: expected redis://HOST:PORT[/DB]"), std::string::npos)
      << out;
  if (RedisServer::Binary().empty()) GTEST_SKIP() << "redis-server is not installed";
  auto redis = RedisServer::Start(0, "right-pass");
  ASSERT_TRUE(redis.ok()) << redis.status();
  const std::string file = ::testing::TempDir() + "/redis_password_" + std::to_string(getpid());
  std::ofstream(file) << "wrong-pass\n";
  EXPECT_NE(RunCommand({RNNSERVE_BIN, "--model-repository", SourcePath("models/examples"), "--port",
                        "0", "--metrics-port", "0", "--sequence-store", (*redis)->url(),
                        "--sequence-store-password-file", file},
                       &out),
            0);
  EXPECT_NE(out.find("AUTH"), std::string::npos) << out;
  EXPECT_EQ(out.find("wrong-pass"), std::string::npos) << out;
  std::filesystem::remove(file);
}

// HAProxy (Debian's) in front of the two replicas, hashing x-sequence-id as
// deploy/haproxy/haproxy.cfg does; skipped, naming the reason, without the binary.
class ScaleOutProxyTest : public ScaleOutTest {
 protected:
  void SetUp() override {
    ScaleOutTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (access(kHaproxy, X_OK) != 0) {
      GTEST_SKIP() << kHaproxy << " is not installed (deploy/install_deps.sh installs haproxy)";
    }
    auto c = ServerProcess::Start(repo_, flags_, {.token = kAlice});
    ASSERT_TRUE(c.ok()) << c.status();
    c_ = std::move(*c);
    port_ = FreeLoopbackPort();
    std::ofstream(dir_ + "/haproxy.cfg")
        << "global\n  maxconn 256\n"
        << "defaults\n  mode http\n  timeout connect 2s\n  timeout client 30s\n"
        << "  timeout server 30s\n  option redispatch\n  retries 3\n  retry-on conn-failure\n"
        << "frontend grpc\n  bind 127.0.0.1:" << port_ << " proto h2\n"
        << "  default_backend rnnserve\n"
        << "backend rnnserve\n  balance hdr(x-sequence-id)\n  hash-type consistent\n"
        << "  server a " << a_->address() << " proto h2 check inter 500ms fall 1\n"
        << "  server b " << b_->address() << " proto h2 check inter 500ms fall 1\n"
        << "  server c " << c_->address() << " proto h2 check inter 500ms fall 1\n";
    pid_ = fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      const std::string cfg = dir_ + "/haproxy.cfg";
      execl(kHaproxy, kHaproxy, "-db", "-q", "-f", cfg.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    // Ready once a sequence runs through it.
    ModelInferResponse resp;
    grpc::Status s;
    for (int i = 0; i < 200; ++i) {
      s = Chunk(address(), kAlice, 1, 0, 0, 40, true, true, &resp);
      if (s.ok()) break;
      usleep(50 * 1000);
    }
    ASSERT_TRUE(s.ok()) << "haproxy on " << address() << ": " << s.error_message();
  }
  void TearDown() override {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    c_.reset();
    ScaleOutTest::TearDown();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  static constexpr char kHaproxy[] = "/usr/sbin/haproxy";
  std::unique_ptr<ServerProcess> c_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// 48 sequences (the fixture's rows in turn) stream concurrently through the proxy, one client
// thread each, spread over three replicas by the hash of their ids. Between rounds of chunks,
// replica A is killed (SIGKILL) and then replica B is stopped (SIGTERM, drained): every
// sequence finishes on the replicas left, from Redis where it had to move, and equals Keras on
// the whole sequence.
TEST_F(ScaleOutProxyTest, ConcurrentSequencesThroughHaproxySurviveAKillAndAStop) {
  constexpr int kSequences = 48;
  const std::vector<int64_t> lengths = {40, 25, 12};
  std::vector<ModelInferResponse> last(kSequences);
  std::vector<std::string> failures(kSequences);
  // Steps [from, to) of every sequence, one thread a sequence.
  const auto round = [&](int64_t from, int64_t to) {
    std::vector<std::thread> threads;
    for (int k = 0; k < kSequences; ++k) {
      threads.emplace_back([&, k] {
        const int b = k % 3;
        for (int64_t t0 = from; t0 < std::min(to, lengths[b]) && failures[k].empty(); t0 += 6) {
          const int64_t t1 = std::min(t0 + 6, lengths[b]);
          // A stream the proxy refused (HTTP/2 REFUSED_STREAM: it reached no replica) is
          // resent, as gRPC's retry policy does for UNAVAILABLE; one a replica ran never is.
          // (Until HAProxy's check takes the replica out: at most a few seconds.)
          grpc::Status s;
          for (int attempt = 0; attempt < 100; ++attempt) {
            s = Chunk(address(), kAlice, 500 + k, b, t0, t1, t0 == 0, t1 == lengths[b], &last[k]);
            if (s.error_message().find("RST_STREAM with error code 7") == std::string::npos) {
              break;
            }
            usleep(100 * 1000);
          }
          if (!s.ok()) failures[k] = "steps " + std::to_string(t0) + ": " + s.error_message();
        }
      });
    }
    for (std::thread& t : threads) t.join();
  };
  round(0, 12);
  ASSERT_EQ(kill(a_->pid(), SIGKILL), 0);
  round(12, 24);
  b_->Stop();
  round(24, 40);
  for (int k = 0; k < kSequences; ++k) {
    ASSERT_TRUE(failures[k].empty()) << "sequence " << k << ": " << failures[k];
    ExpectKeras(last[k], k % 3);
  }
}

}  // namespace
}  // namespace rnnserve::testing
