// Two rnnserve replicas sharing one real redis-server (--sequence-store): a KServe sequence
// moves between them chunk by chunk, survives the SIGKILL of the replica that served it, and
// still equals Keras on the whole sequence; another caller cannot continue it on either
// replica. Skips, naming the reason, without redis-server.

#include "tests/integration/scale_out_fixture.h"

namespace rnnserve::testing {
namespace {

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
    // Told what an id that is not live is told (a live id does not show to Bob).
    const grpc::Status s = Chunk(*replica, kBob, 9, 0, 7, 14, false, false, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_NE(s.error_message().find("is not live"), std::string::npos) << s.error_message();
    const grpc::Status restart = Chunk(*replica, kBob, 9, 0, 0, 7, true, false, &resp);
    EXPECT_EQ(restart.error_code(), grpc::StatusCode::ALREADY_EXISTS) << restart.error_message();
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

}  // namespace
}  // namespace rnnserve::testing
