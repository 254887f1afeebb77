// The Redis state store with --sequence-durability=drain (server/store/redis_store.h) against a
// real redis-server, two stores on one Redis standing for two replicas: the holder serves its
// sequences from memory without round trips, hands them over when it drains, and a sequence
// whose holder died without draining is lost, said so and counted once. Skips, naming the
// reason, without redis-server.

#include <string>
#include <utility>

#include "gtest/gtest.h"
#include "server/store/redis_store.h"
#include "tests/support/redis_server.h"

namespace rnnserve::server::store {
namespace {

using core::StateStore;

class StoreRedisDrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::RedisServer::Binary().empty()) {
      GTEST_SKIP() << "redis-server is not installed (deploy/install_deps.sh installs it)";
    }
    auto r = testing::RedisServer::Start();
    ASSERT_TRUE(r.ok()) << r.status();
    redis_ = std::move(*r);
    auto endpoint = ParseRedisUrl(redis_->url());
    ASSERT_TRUE(endpoint.ok()) << endpoint.status();
    auto c = RedisClient::Create({.endpoint = *endpoint});
    ASSERT_TRUE(c.ok());
    client_ = std::move(*c);
    a_ = NewStore("replica-a");
    b_ = NewStore("replica-b");
  }
  // A heartbeat of 60 s (renewed every 20 s, first at once): no hand-over runs during a test
  // unless it asks for a shorter one.
  std::unique_ptr<RedisStore> NewStore(const std::string& id,
                                       absl::Duration heartbeat_ttl = absl::Seconds(60)) {
    auto s = RedisStore::Create(
        client_.get(),
        {.durability = RedisStore::Durability::kDrain,
         .replica_id = id,
         .heartbeat_ttl = heartbeat_ttl,
         .now = [this] { return now_; },
         .facts =
             [](const Servable*) {
               RedisStore::ModelFacts facts{.version = 1};
               facts.shapes["lstm"].push_back(engine::Shape{1, 2});
               return facts;
             },
         .resolve = [](const std::string&, int64_t)
             -> absl::StatusOr<std::shared_ptr<const Servable>> { return nullptr; },
         .on_round_trip = [this](StoreOp, absl::Duration, absl::StatusCode) { ++round_trips_; },
         .on_lost = [this] { ++lost_; }});
    EXPECT_TRUE(s.ok()) << s.status();
    return std::move(*s);
  }
  static LayerStates State(float v) {
    LayerStates s;
    s["lstm"].push_back(engine::Tensor::Float({1, 2}, {v, -v}));
    return s;
  }
  static float H(const StateStore::Lease& lease) { return lease.states.at("lstm")[0].f32()[0]; }
  absl::StatusOr<StateStore::Lease> Acquire(RedisStore& s, uint64_t id, bool start,
                                            const StateStore::Caller& who) {
    return s.Acquire("m", id, start, nullptr, limits_, who);
  }
  std::string Field(uint64_t id, const char* field) {
    auto r = client_->Command({"HGET", "rnnserve:seq:m/" + std::to_string(id), field});
    return r.ok() ? r->str : "";
  }

  absl::Time now_ = absl::FromUnixSeconds(1000);
  StateStore::Limits limits_{.max_idle = absl::Seconds(30), .max_sequences = 8};
  const StateStore::Caller alice_{.owner = "token:a", .client = "token:a"};
  const StateStore::Caller bob_{.owner = "token:b", .client = "token:b"};
  int round_trips_ = 0;
  int lost_ = 0;
  std::unique_ptr<testing::RedisServer> redis_;
  std::unique_ptr<RedisClient> client_;
  std::unique_ptr<RedisStore> a_, b_;
};

TEST_F(StoreRedisDrainTest, HolderServesItsChunksFromMemoryWithoutRoundTrips) {
  ASSERT_TRUE(Acquire(*a_, 7, true, alice_).ok());  // the start: one round trip
  ASSERT_TRUE(a_->Release("m", 7, State(1), false, false, 3).ok());
  for (float v = 2; v <= 4; ++v) {
    auto lease = Acquire(*a_, 7, false, alice_);
    ASSERT_TRUE(lease.ok()) << lease.status();
    EXPECT_EQ(H(*lease), v - 1);
    ASSERT_TRUE(a_->Release("m", 7, State(v), false, false, 3).ok());
  }
  EXPECT_EQ(round_trips_, 1);
  EXPECT_EQ(a_->counts().served_from_memory, 3);
  // Redis has the start's record, held by A.
  EXPECT_EQ(Field(7, "epoch"), "1");
  EXPECT_EQ(Field(7, "holder"), "replica-a");
}

TEST_F(StoreRedisDrainTest, HeldSequenceIsUnavailableElsewhereUntilItsHolderDrains) {
  ASSERT_TRUE(Acquire(*a_, 7, true, alice_).ok());
  ASSERT_TRUE(a_->Release("m", 7, State(1), false, false, 3).ok());
  ASSERT_TRUE(Acquire(*a_, 7, false, alice_).ok());
  ASSERT_TRUE(a_->Release("m", 7, State(2), false, false, 4).ok());
  const absl::Status held = Acquire(*b_, 7, false, alice_).status();
  EXPECT_EQ(held.code(), absl::StatusCode::kUnavailable) << held;
  EXPECT_NE(held.message().find("held in memory by replica replica-a"), std::string::npos) << held;
  const RedisStore::DrainResult drained = a_->Drain();
  EXPECT_EQ(drained.flushed, 1);
  EXPECT_EQ(drained.failed, 0);
  EXPECT_EQ(Field(7, "holder"), "");
  auto on_b = Acquire(*b_, 7, false, alice_);
  ASSERT_TRUE(on_b.ok()) << on_b.status();
  EXPECT_EQ(H(*on_b), 2);
  EXPECT_EQ(on_b->steps, 7);
  // B holds it now (it does not drain); A's copy is never used again.
  ASSERT_TRUE(b_->Release("m", 7, State(3), false, false, 1).ok());
  EXPECT_EQ(Field(7, "holder"), "replica-b");
  EXPECT_EQ(Acquire(*a_, 7, false, alice_).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(lost_, 0);
}

// The proxy's routing changed (a replica added or taken out): another replica gets the held
// sequence's chunks. It asks the holder to hand it over; the holder does at its next
// heartbeat, and a retry continues the sequence there with the holder's newest states.
TEST_F(StoreRedisDrainTest, HeldSequenceIsHandedOverToTheReplicaItsChunksNowReach) {
  a_.reset();  // (its end deletes the heartbeat key of replica-a)
  a_ = NewStore("replica-a", absl::Milliseconds(300));  // beats every 100 ms
  for (uint64_t id : {7, 8}) {
    ASSERT_TRUE(Acquire(*a_, id, true, alice_).ok());
    ASSERT_TRUE(a_->Release("m", id, State(1), false, false, 3).ok());
  }
  ASSERT_TRUE(Acquire(*a_, 7, false, alice_).ok());
  ASSERT_TRUE(a_->Release("m", 7, State(2), false, false, 4).ok());
  ASSERT_TRUE(Acquire(*a_, 8, false, alice_).ok());  // busy on A while B asks for it
  absl::StatusOr<StateStore::Lease> on_b = Acquire(*b_, 7, false, alice_);
  EXPECT_EQ(on_b.status().code(), absl::StatusCode::kUnavailable) << on_b.status();
  EXPECT_NE(on_b.status().message().find("it has been asked to: retry"), std::string::npos)
      << on_b.status();
  for (int i = 0; i < 100 && !on_b.ok(); ++i) {
    absl::SleepFor(absl::Milliseconds(50));
    on_b = Acquire(*b_, 7, false, alice_);
  }
  ASSERT_TRUE(on_b.ok()) << on_b.status();
  EXPECT_EQ(H(*on_b), 2);
  EXPECT_EQ(on_b->steps, 7);
  // The busy one is written when its chunk ends, and continues on B.
  EXPECT_EQ(Acquire(*b_, 8, false, alice_).status().code(), absl::StatusCode::kUnavailable);
  for (int i = 0; i < 100 && Field(8, "holder") == "replica-a"; ++i) {
    // Until A's heartbeat has read the request: A still holds it.
    if (i == 10) {
      ASSERT_TRUE(a_->Release("m", 8, State(5), false, false, 2).ok());
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  auto eight = Acquire(*b_, 8, false, alice_);
  ASSERT_TRUE(eight.ok()) << eight.status();
  EXPECT_EQ(H(*eight), 5);
  EXPECT_EQ(lost_, 0);
}

TEST_F(StoreRedisDrainTest, ChunkInFlightAtTheDrainIsWrittenWhenItEnds) {
  ASSERT_TRUE(Acquire(*a_, 7, true, alice_).ok());
  ASSERT_TRUE(a_->Release("m", 7, State(1), false, false, 3).ok());
  ASSERT_TRUE(Acquire(*a_, 7, false, alice_).ok());
  EXPECT_EQ(a_->Drain().flushed, 0);  // busy: its Release writes it
  ASSERT_TRUE(a_->Release("m", 7, State(5), false, false, 2).ok());
  auto on_b = Acquire(*b_, 7, false, alice_);
  ASSERT_TRUE(on_b.ok()) << on_b.status();
  EXPECT_EQ(H(*on_b), 5);
  EXPECT_EQ(on_b->steps, 5);
  // A drained replica starts sequences without holding them: written after each chunk.
  ASSERT_TRUE(Acquire(*a_, 8, true, alice_).ok());
  ASSERT_TRUE(a_->Release("m", 8, State(6), false, false, 2).ok());
  EXPECT_EQ(Field(8, "holder"), "");
  EXPECT_EQ(Field(8, "epoch"), "2");
}

// A replica gone without draining (its heartbeat key gone, as after a SIGKILL once the key
// expires): its sequences are lost, DATA_LOSS naming it, counted once, and then not live.
TEST_F(StoreRedisDrainTest, SequenceOfAReplicaGoneWithoutDrainingIsLostAndCountedOnce) {
  ASSERT_TRUE(Acquire(*a_, 7, true, alice_).ok());
  ASSERT_TRUE(a_->Release("m", 7, State(1), false, false, 3).ok());
  a_.reset();
  auto lost = Acquire(*b_, 7, false, alice_);
  EXPECT_EQ(lost.status().code(), absl::StatusCode::kDataLoss) << lost.status();
  EXPECT_NE(lost.status().message().find("is lost: replica replica-a"), std::string::npos)
      << lost.status();
  EXPECT_EQ(lost_, 1);
  EXPECT_EQ(Acquire(*b_, 7, false, alice_).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(lost_, 1);
  ASSERT_TRUE(Acquire(*b_, 7, true, alice_).ok());  // the id can start again
}

// Another caller learns nothing of a held sequence: told what an id that is not live is told.
TEST_F(StoreRedisDrainTest, AnotherCallerIsToldAHeldSequenceIsNotLive) {
  ASSERT_TRUE(Acquire(*a_, 7, true, alice_).ok());
  ASSERT_TRUE(a_->Release("m", 7, State(1), false, false, 3).ok());
  const absl::Status s = Acquire(*b_, 7, false, bob_).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("is not live"), std::string::npos) << s;
  a_.reset();  // lost, but not to Bob
  EXPECT_EQ(Acquire(*b_, 7, false, bob_).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(lost_, 0);
}

TEST_F(StoreRedisDrainTest, HolderRenewsTheRecordsTtlAtHalfTheIdleTimeout) {
  ASSERT_TRUE(Acquire(*a_, 7, true, alice_).ok());
  ASSERT_TRUE(a_->Release("m", 7, State(1), false, false, 3).ok());
  ASSERT_TRUE(client_->Command({"PEXPIRE", "rnnserve:seq:m/7", "5000"}).ok());
  now_ += absl::Seconds(10);  // before max_idle / 2: memory only
  ASSERT_TRUE(Acquire(*a_, 7, false, alice_).ok());
  ASSERT_TRUE(a_->Release("m", 7, State(2), false, false, 3).ok());
  EXPECT_LE(client_->Command({"PTTL", "rnnserve:seq:m/7"})->integer, 5000);
  now_ += absl::Seconds(10);  // 20 s since the start's write: renewed
  auto lease = Acquire(*a_, 7, false, alice_);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(H(*lease), 2);
  EXPECT_GT(client_->Command({"PTTL", "rnnserve:seq:m/7"})->integer, 20000);
  EXPECT_EQ(round_trips_, 2);  // the start, the renewal
}

// A sequence idle past max_idle leaves the holder's memory and Redis, as its record would
// expire with --sequence-durability=chunk.
TEST_F(StoreRedisDrainTest, IdleHeldSequenceLeavesMemoryAndRedis) {
  ASSERT_TRUE(Acquire(*a_, 7, true, alice_).ok());
  ASSERT_TRUE(a_->Release("m", 7, State(1), false, false, 3).ok());
  now_ += absl::Seconds(31);
  ASSERT_TRUE(Acquire(*a_, 8, true, alice_).ok());  // expiry runs at an Acquire
  EXPECT_EQ(client_->Command({"EXISTS", "rnnserve:seq:m/7"})->integer, 0);
  EXPECT_EQ(Acquire(*b_, 7, false, alice_).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(lost_, 0);
}

TEST_F(StoreRedisDrainTest, EndErasesAHeldSequence) {
  ASSERT_TRUE(Acquire(*a_, 7, true, alice_).ok());
  ASSERT_TRUE(a_->Release("m", 7, State(1), false, false, 3).ok());
  ASSERT_TRUE(Acquire(*a_, 7, false, alice_).ok());
  ASSERT_TRUE(a_->Release("m", 7, State(2), true, false, 3).ok());
  EXPECT_EQ(client_->Command({"EXISTS", "rnnserve:seq:m/7"})->integer, 0);
  EXPECT_EQ(a_->live(), 0);
}

TEST_F(StoreRedisDrainTest, HeartbeatKeyLivesWhileTheReplicaDoes) {
  auto ttl = client_->Command({"PTTL", "rnnserve:replica:replica-a"});  // set by Create
  ASSERT_TRUE(ttl.ok());
  EXPECT_GT(ttl->integer, 0);
  EXPECT_LE(ttl->integer, 60000);
  a_.reset();
  EXPECT_EQ(client_->Command({"EXISTS", "rnnserve:replica:replica-a"})->integer, 0);
}

}  // namespace
}  // namespace rnnserve::server::store
