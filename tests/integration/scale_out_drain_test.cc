// Two rnnserve replicas sharing one real redis-server with --sequence-durability=drain: a
// replica keeps the sequences it serves in memory; stopped with SIGTERM it hands every one of
// them over to the store and the other replica finishes them equal to Keras (none lost);
// killed with SIGKILL it loses them, and the replica their next chunks reach says so and counts
// them. Skips, naming the reason, without redis-server.

#include "tests/integration/scale_out_fixture.h"

namespace rnnserve::testing {
namespace {

class ScaleOutDrainTest : public ScaleOutTest {
 protected:
  std::vector<std::string> ExtraFlags() const override {
    return {"--sequence-durability", "drain"};
  }
};

TEST_F(ScaleOutDrainTest, StoppedReplicaHandsEverySequenceOverAndNoneIsLost) {
  constexpr int kSequences = 24;
  const std::vector<int64_t> lengths = {40, 25, 12};
  std::vector<ModelInferResponse> last(kSequences);
  for (int k = 0; k < kSequences; ++k) {
    for (int64_t t0 = 0; t0 < 10; t0 += 5) {
      const grpc::Status s =
          Chunk(*a_, kAlice, 700 + k, k % 3, t0, t0 + 5, t0 == 0, false, &last[k]);
      ASSERT_TRUE(s.ok()) << "sequence " << k << ": " << s.error_message();
    }
  }
  // A holds their newest states in memory only: B does not answer from the store's older ones.
  ModelInferResponse resp;
  const grpc::Status held = Chunk(*b_, kAlice, 700, 0, 10, 15, false, false, &resp);
  EXPECT_EQ(held.error_code(), grpc::StatusCode::UNAVAILABLE) << held.error_message();
  EXPECT_NE(held.error_message().find("held in memory by replica"), std::string::npos)
      << held.error_message();
  ASSERT_EQ(a_->Stop(), 0);
  for (int k = 0; k < kSequences; ++k) {
    const int b = k % 3;
    for (int64_t t0 = 10; t0 < lengths[b]; t0 += 5) {
      const int64_t t1 = std::min(t0 + 5, lengths[b]);
      const grpc::Status s =
          Chunk(*b_, kAlice, 700 + k, b, t0, t1, false, t1 == lengths[b], &last[k]);
      ASSERT_TRUE(s.ok()) << "sequence " << k << " steps " << t0 << ": " << s.error_message();
    }
    ExpectKeras(last[k], b);
  }
  EXPECT_EQ(Counter(b_metrics_, "rnnserve_sequences_lost_total"), 0);
  EXPECT_EQ(Counter(b_metrics_, "rnnserve_sequences_resumed_from_store_total"), kSequences);
}

TEST_F(ScaleOutDrainTest, KilledReplicaLosesTheSequencesItHeldAndTheyAreCounted) {
  constexpr int kSequences = 5;
  ModelInferResponse resp;
  for (int k = 0; k < kSequences; ++k) {
    ASSERT_TRUE(Chunk(*a_, kAlice, 800 + k, k % 3, 0, 7, true, false, &resp).ok());
  }
  ASSERT_EQ(kill(a_->pid(), SIGKILL), 0);
  for (int k = 0; k < kSequences; ++k) {
    // Held (UNAVAILABLE) until A's heartbeat key expires (3 s), then lost.
    grpc::Status s;
    for (int attempt = 0; attempt < 150; ++attempt) {
      s = Chunk(*b_, kAlice, 800 + k, k % 3, 7, 12, false, false, &resp);
      if (s.error_code() != grpc::StatusCode::UNAVAILABLE) break;
      usleep(100 * 1000);
    }
    EXPECT_EQ(s.error_code(), grpc::StatusCode::DATA_LOSS) << s.error_message();
    EXPECT_NE(s.error_message().find("is lost"), std::string::npos) << s.error_message();
    EXPECT_NE(s.error_message().find("--sequence-durability=drain"), std::string::npos)
        << s.error_message();
  }
  EXPECT_EQ(Counter(b_metrics_, "rnnserve_sequences_lost_total"), kSequences);
  // A lost id starts again.
  const grpc::Status again = Chunk(*b_, kAlice, 800, 0, 0, 40, true, true, &resp);
  ASSERT_TRUE(again.ok()) << again.error_message();
  ExpectKeras(resp, 0);
}

// Sequences in this process are never written anywhere: drain durability is refused.
TEST(ScaleOutStartTest, DrainDurabilityWithoutAStoreStopsTheStart) {
  std::string out;
  EXPECT_NE(RunCommand({RNNSERVE_BIN, "--model-repository", SourcePath("models/examples"), "--port",
                        "0", "--metrics-port", "0", "--sequence-durability", "drain"},
                       &out),
            0);
  EXPECT_NE(out.find("--sequence-durability=drain needs --sequence-store"), std::string::npos)
      << out;
}

}  // namespace
}  // namespace rnnserve::testing
