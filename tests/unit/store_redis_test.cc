// The Redis state store (server/store/redis_store.h) against a real redis-server, with two
// stores on one Redis standing for two replicas. Skips, naming the reason, without the binary.

#include "server/store/redis_store.h"

#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <sstream>
#include <string>
#include <utility>

#include "absl/strings/str_replace.h"
#include "server/store/store_metrics.h"

#include "gtest/gtest.h"
#include "tests/support/redis_server.h"

namespace rnnserve::server::store {
namespace {

using core::StateStore;

class StoreRedisTest : public ::testing::Test {
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
    a_ = NewStore();
    b_ = NewStore();
  }
  std::unique_ptr<RedisStore> NewStore(int fair_floor_percent = 100) {
    auto s = RedisStore::Create(
        client_.get(),
        {.now = [this] { return now_; },
         .facts =
             [](const Servable*) {
               RedisStore::ModelFacts facts{.version = 1};
               facts.shapes["lstm"].push_back(engine::Shape{1, 2});
               return facts;
             },
         .resolve = [this](const std::string&,
                           int64_t version) -> absl::StatusOr<std::shared_ptr<const Servable>> {
           if (version != served_version_) return absl::NotFoundError("version not loaded");
           return nullptr;
         },
         .fair_floor_percent = fair_floor_percent});
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

  absl::Time now_ = absl::FromUnixSeconds(1000);
  int64_t served_version_ = 1;
  StateStore::Limits limits_{.max_idle = absl::Seconds(30), .max_sequences = 4};
  const StateStore::Caller alice_{.owner = "token:a", .client = "token:a"};
  const StateStore::Caller bob_{.owner = "token:b", .client = "token:b"};
  std::unique_ptr<testing::RedisServer> redis_;
  std::unique_ptr<RedisClient> client_;
  std::unique_ptr<RedisStore> a_, b_;
};

TEST_F(StoreRedisTest, SequenceContinuesOnTheOtherReplicaAndBack) {
  ASSERT_TRUE(Acquire(*a_, 7, true, alice_).ok());
  ASSERT_TRUE(a_->Release("m", 7, State(1), false, false, 3).ok());
  auto on_b = Acquire(*b_, 7, false, alice_);
  ASSERT_TRUE(on_b.ok()) << on_b.status();
  EXPECT_EQ(H(*on_b), 1);
  EXPECT_EQ(on_b->steps, 3);
  ASSERT_TRUE(b_->Release("m", 7, State(2), false, false, 4).ok());
  // A's copy is one chunk old: it is not used.
  auto back_on_a = Acquire(*a_, 7, false, alice_);
  ASSERT_TRUE(back_on_a.ok()) << back_on_a.status();
  EXPECT_EQ(H(*back_on_a), 2);
  EXPECT_EQ(back_on_a->steps, 7);
  EXPECT_EQ(a_->counts().served_from_memory, 0);
  EXPECT_EQ(a_->counts().resumed_from_store, 1);
  EXPECT_EQ(b_->counts().resumed_from_store, 1);
}

TEST_F(StoreRedisTest, SameReplicaServesItsCopyWhileTheStoreAgrees) {
  ASSERT_TRUE(Acquire(*a_, 7, true, alice_).ok());
  ASSERT_TRUE(a_->Release("m", 7, State(1), false, false, 3).ok());
  auto again = Acquire(*a_, 7, false, alice_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(H(*again), 1);
  EXPECT_EQ(a_->counts().served_from_memory, 1);
  EXPECT_EQ(a_->counts().resumed_from_store, 0);
}

// On every replica, another caller's chunk is told what it would be told of an id that is not
// live, and its start only that the id is in use.
TEST_F(StoreRedisTest, AnotherCallerIsDeniedOnEveryReplica) {
  const absl::Status never = Acquire(*a_, 8, false, bob_).status();
  ASSERT_EQ(never.code(), absl::StatusCode::kInvalidArgument);
  auto as_8 = [](const absl::Status& s) {
    return std::make_pair(s.code(),
                          absl::StrReplaceAll(s.message(), {{"sequence 7 ", "sequence 8 "}}));
  };
  ASSERT_TRUE(Acquire(*a_, 7, true, alice_).ok());
  ASSERT_TRUE(a_->Release("m", 7, State(1), false, false, 3).ok());
  EXPECT_EQ(as_8(Acquire(*a_, 7, false, bob_).status()), as_8(never));
  EXPECT_EQ(as_8(Acquire(*b_, 7, false, bob_).status()), as_8(never));
  const absl::Status start = Acquire(*b_, 7, true, bob_).status();
  EXPECT_EQ(start.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(start.message().find("is in use; start another id"), std::string::npos) << start;
  // Alice's sequence is as she left it.
  auto mine = Acquire(*b_, 7, false, alice_);
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_EQ(H(*mine), 1);
}

TEST_F(StoreRedisTest, StartOfASequenceLiveElsewhereIsAlreadyExists) {
  ASSERT_TRUE(Acquire(*a_, 7, true, alice_).ok());
  ASSERT_TRUE(a_->Release("m", 7, State(1), false, false, 3).ok());
  EXPECT_EQ(Acquire(*b_, 7, true, alice_).status().code(), absl::StatusCode::kAlreadyExists);
}

TEST_F(StoreRedisTest, EndedOrUnknownSequenceIsNotLiveAnywhere) {
  EXPECT_EQ(Acquire(*a_, 9, false, alice_).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(Acquire(*a_, 7, true, alice_).ok());
  ASSERT_TRUE(a_->Release("m", 7, State(1), false, false, 3).ok());
  ASSERT_TRUE(Acquire(*b_, 7, false, alice_).ok());
  ASSERT_TRUE(b_->Release("m", 7, State(2), true, false, 3).ok());  // ends on B
  auto on_a = Acquire(*a_, 7, false, alice_);  // A still holds a copy: the store says no
  EXPECT_EQ(on_a.status().code(), absl::StatusCode::kInvalidArgument) << on_a.status();
  EXPECT_NE(on_a.status().message().find("not live"), std::string::npos);
  EXPECT_EQ(a_->live(), 0);
}

TEST_F(StoreRedisTest, RacingChunksOnTwoReplicasStoreOnlyTheFirst) {
  ASSERT_TRUE(Acquire(*a_, 7, true, alice_).ok());
  ASSERT_TRUE(a_->Release("m", 7, State(1), false, false, 3).ok());
  ASSERT_TRUE(Acquire(*a_, 7, false, alice_).ok());
  ASSERT_TRUE(Acquire(*b_, 7, false, alice_).ok());
  EXPECT_EQ(Acquire(*a_, 7, false, alice_).status().code(), absl::StatusCode::kAborted);
  ASSERT_TRUE(b_->Release("m", 7, State(2), false, false, 1).ok());
  const absl::Status late = a_->Release("m", 7, State(3), false, false, 1);
  EXPECT_EQ(late.code(), absl::StatusCode::kAborted) << late;
  auto now = Acquire(*a_, 7, false, alice_);
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_EQ(H(*now), 2);
  EXPECT_EQ(now->steps, 4);
}

TEST_F(StoreRedisTest, BadRecordIsDataLossForThatSequenceOnly) {
  ASSERT_TRUE(client_->Command({"HSET", "rnnserve:seq:m/5", "epoch", "3", "rec", "garbage"}).ok());
  EXPECT_EQ(Acquire(*a_, 5, false, alice_).status().code(), absl::StatusCode::kDataLoss);
  // A record of the right form with states of another shape.
  SequenceRecord r{.model_version = 1, .steps = 2, .epoch = 3, .owner = "token:a"};
  r.states["lstm"].push_back(engine::Tensor::Float({1, 5}));
  ASSERT_TRUE(
      client_->Command({"HSET", "rnnserve:seq:m/6", "epoch", "3", "rec", EncodeRecord(r)}).ok());
  auto bad = Acquire(*a_, 6, false, alice_);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("expected [1,2]"), std::string::npos) << bad.status();
  ASSERT_TRUE(Acquire(*a_, 7, true, alice_).ok());
  EXPECT_TRUE(a_->Release("m", 7, State(1), false, false, 1).ok());
}

TEST_F(StoreRedisTest, StoreThatLostWritesIsDataLossNotAnOlderAnswer) {
  ASSERT_TRUE(Acquire(*a_, 7, true, alice_).ok());
  ASSERT_TRUE(a_->Release("m", 7, State(1), false, false, 3).ok());
  auto old = client_->Command({"HGET", "rnnserve:seq:m/7", "rec"});
  ASSERT_TRUE(old.ok());
  ASSERT_TRUE(Acquire(*a_, 7, false, alice_).ok());
  ASSERT_TRUE(a_->Release("m", 7, State(2), false, false, 3).ok());
  // Redis comes back with the first chunk's record only.
  ASSERT_TRUE(client_->Command({"HSET", "rnnserve:seq:m/7", "epoch", "2", "rec", old->str}).ok());
  auto lost = Acquire(*a_, 7, false, alice_);
  EXPECT_EQ(lost.status().code(), absl::StatusCode::kDataLoss) << lost.status();
  EXPECT_NE(lost.status().message().find("Redis lost writes"), std::string::npos);
}

TEST_F(StoreRedisTest, ConnectionsKeptAcrossARedisRestartAreMadeAgain) {
  // Both stores hold pooled connections; the Redis behind them restarts (append-only file).
  redis_ = nullptr;
  auto r = testing::RedisServer::Start(0, "", /*append_only=*/true);
  ASSERT_TRUE(r.ok()) << r.status();
  redis_ = std::move(*r);
  auto endpoint = ParseRedisUrl(redis_->url());
  ASSERT_TRUE(endpoint.ok());
  client_ = std::move(*RedisClient::Create({.endpoint = *endpoint}));
  a_ = NewStore();
  b_ = NewStore();
  ASSERT_TRUE(Acquire(*a_, 7, true, alice_).ok());
  ASSERT_TRUE(a_->Release("m", 7, State(1), false, false, 3).ok());
  ASSERT_TRUE(redis_->Restart().ok());
  auto on_b = Acquire(*b_, 7, false, alice_);
  ASSERT_TRUE(on_b.ok()) << on_b.status();
  EXPECT_EQ(H(*on_b), 1);
  EXPECT_TRUE(b_->Release("m", 7, State(2), false, false, 3).ok());
}

TEST_F(StoreRedisTest, VersionThisReplicaDoesNotServeIsFailedPrecondition) {
  ASSERT_TRUE(Acquire(*a_, 7, true, alice_).ok());
  ASSERT_TRUE(a_->Release("m", 7, State(1), false, false, 3).ok());
  served_version_ = 2;
  auto on_b = Acquire(*b_, 7, false, alice_);
  EXPECT_EQ(on_b.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(on_b.status().message().find("runs on version 1"), std::string::npos);
}

TEST_F(StoreRedisTest, RecordLivesForTheIdleTimeoutRenewedByEachChunk) {
  ASSERT_TRUE(Acquire(*a_, 7, true, alice_).ok());
  ASSERT_TRUE(a_->Release("m", 7, State(1), false, false, 3).ok());
  auto ttl = client_->Command({"PTTL", "rnnserve:seq:m/7"});
  ASSERT_TRUE(ttl.ok());
  EXPECT_GT(ttl->integer, 0);
  EXPECT_LE(ttl->integer, 30000);
}

TEST_F(StoreRedisTest, StoreDownIsUnavailableAndServingResumesWhenItIsBack) {
  ASSERT_TRUE(Acquire(*a_, 7, true, alice_).ok());
  redis_->Kill();
  const absl::Status lost = a_->Release("m", 7, State(1), false, false, 3);
  EXPECT_EQ(lost.code(), absl::StatusCode::kUnavailable) << lost;
  EXPECT_NE(lost.message().find("could not be stored"), std::string::npos) << lost;
  auto down = Acquire(*a_, 8, true, alice_);
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(down.status().message().find(redis_->url()), std::string::npos) << down.status();
  auto back = testing::RedisServer::Start(redis_->port());
  ASSERT_TRUE(back.ok()) << back.status();
  redis_ = std::move(*back);
  ASSERT_TRUE(Acquire(*a_, 8, true, alice_).ok());
  EXPECT_TRUE(a_->Release("m", 8, State(1), false, false, 3).ok());
}

TEST_F(StoreRedisTest, EndOwnerErasesTheOwnersSequencesFromTheStore) {
  ASSERT_TRUE(Acquire(*a_, 1, true, alice_).ok());
  ASSERT_TRUE(a_->Release("m", 1, State(1), false, false, 1).ok());
  ASSERT_TRUE(Acquire(*a_, 2, true, bob_).ok());
  ASSERT_TRUE(a_->Release("m", 2, State(1), false, false, 1).ok());
  EXPECT_EQ(a_->EndOwner("token:a"), 1);
  EXPECT_EQ(Acquire(*b_, 1, false, alice_).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Acquire(*b_, 2, false, bob_).ok());
}

TEST_F(StoreRedisTest, BoundsCountTheReplicasOwnSequences) {
  limits_.max_sequences = 1;
  ASSERT_TRUE(Acquire(*a_, 1, true, alice_).ok());
  ASSERT_TRUE(a_->Release("m", 1, State(1), false, false, 1).ok());
  EXPECT_EQ(Acquire(*a_, 2, true, alice_).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(Acquire(*b_, 2, true, alice_).ok());
}

TEST_F(StoreRedisTest, MaxSequencesIsSharedFairlyAmongClients) {
  // 10 sequences with a floor of 2 (20 %): a lone squatter leaves the last 2 for newcomers, and
  // once two clients hold some, neither may hold more than 5.
  std::unique_ptr<RedisStore> s = NewStore(20);
  RedisStore& store = *s;
  limits_.max_sequences = 10;
  auto start = [&](uint64_t id, const StateStore::Caller& who) {
    auto lease = Acquire(store, id, true, who);
    if (!lease.ok()) return lease.status();
    return store.Release("m", id, State(1), false, false, 1);
  };
  uint64_t id = 1;
  while (start(id, alice_).ok()) ++id;
  EXPECT_EQ(id - 1, 8u);
  absl::Status refused = start(id, alice_);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("kept for callers below the floor"), std::string::npos)
      << refused;
  EXPECT_TRUE(start(100, bob_).ok());
  EXPECT_TRUE(start(101, bob_).ok());
  // alice is past her fair share (5 of 10 for two clients): ending one does not let her start
  // another, while a newcomer may take the freed place.
  ASSERT_TRUE(Acquire(store, 1, false, alice_).ok());
  ASSERT_TRUE(store.Release("m", 1, State(1), true, false, 2).ok());
  refused = start(id, alice_);
  EXPECT_NE(refused.message().find("its fair share is 5"), std::string::npos) << refused;
  const StateStore::Caller carol{.owner = "token:c", .client = "token:c"};
  EXPECT_TRUE(start(200, carol).ok());
}

TEST_F(StoreRedisTest, MetricsCountRoundTripsErrorsAndWhereStatesCameFrom) {
  StoreMetrics metrics;
  auto s = RedisStore::Create(
      client_.get(),
      {.now = [this] { return now_; },
       .facts =
           [](const Servable*) {
             RedisStore::ModelFacts facts{.version = 1};
             facts.shapes["lstm"].push_back(engine::Shape{1, 2});
             return facts;
           },
       .resolve = [](const std::string&, int64_t)
           -> absl::StatusOr<std::shared_ptr<const Servable>> { return nullptr; },
       .on_round_trip = [&](StoreOp op, absl::Duration took,
                            absl::StatusCode code) { metrics.RoundTrip(op, took, code); },
       .on_continue = [&](bool from_memory) { metrics.Continued(from_memory); }});
  ASSERT_TRUE(s.ok());
  RedisStore& c = **s;
  ASSERT_TRUE(Acquire(c, 7, true, alice_).ok());
  ASSERT_TRUE(c.Release("m", 7, State(1), false, false, 3).ok());
  ASSERT_TRUE(Acquire(c, 7, false, alice_).ok());  // from memory
  ASSERT_TRUE(c.Release("m", 7, State(2), false, false, 3).ok());
  ASSERT_TRUE(Acquire(*b_, 7, false, alice_).ok());
  ASSERT_TRUE(b_->Release("m", 7, State(3), false, false, 3).ok());
  ASSERT_TRUE(Acquire(c, 7, false, alice_).ok());  // from the store: B advanced it
  redis_->Kill();
  EXPECT_FALSE(c.Release("m", 7, State(4), false, false, 3).ok());
  std::ostringstream text;
  prometheus::TextSerializer().Serialize(text, metrics.registry()->Collect());
  const std::string t = text.str();
  for (const char* line :
       {"rnnserve_sequence_store_duration_seconds_count{op=\"acquire\"} 3",
        "rnnserve_sequence_store_duration_seconds_count{op=\"release\"} 3",
        "rnnserve_sequence_store_errors_total{code=\"UNAVAILABLE\",op=\"release\"} 1",
        "rnnserve_sequence_store_errors_total{code=\"UNAVAILABLE\",op=\"acquire\"} 0",
        "rnnserve_sequence_chunks_from_memory_total 1",
        "rnnserve_sequences_resumed_from_store_total 1"}) {
    EXPECT_NE(t.find(line), std::string::npos) << line << "\n" << t;
  }
}

TEST(RedisClientTest, PasswordIsSentAndARefusedOneIsUnavailableWithoutIt) {
  if (testing::RedisServer::Binary().empty()) {
    GTEST_SKIP() << "redis-server is not installed (deploy/install_deps.sh installs it)";
  }
  auto redis = testing::RedisServer::Start(0, "s3cret-pass");
  ASSERT_TRUE(redis.ok()) << redis.status();
  auto endpoint = ParseRedisUrl((*redis)->url() + "/1");
  ASSERT_TRUE(endpoint.ok());
  auto good = RedisClient::Create({.endpoint = *endpoint, .password = "s3cret-pass"});
  ASSERT_TRUE(good.ok());
  auto pong = (*good)->Command({"PING"});
  ASSERT_TRUE(pong.ok()) << pong.status();
  EXPECT_EQ(pong->str, "PONG");
  auto db = (*good)->Command({"CLIENT", "INFO"});  // SELECTed database 1
  ASSERT_TRUE(db.ok()) << db.status();
  EXPECT_NE(db->str.find(" db=1 "), std::string::npos) << db->str;
  for (const std::string& password : {std::string("wrong-pass"), std::string()}) {
    auto bad = RedisClient::Create({.endpoint = *endpoint, .password = password});
    ASSERT_TRUE(bad.ok());
    auto refused = (*bad)->Command({"PING"});
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << password;
    EXPECT_EQ(refused.status().message().find("wrong-pass"), std::string::npos) << refused.status();
  }
}

TEST(RedisUrlTest, ParsesHostPortAndDatabase) {
  auto e = ParseRedisUrl("redis://redis.svc:6380/2");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->host, "redis.svc");
  EXPECT_EQ(e->port, 6380);
  EXPECT_EQ(e->db, 2);
  EXPECT_EQ(ParseRedisUrl("redis://h:1")->db, 0);
  for (const char* bad : {"h:6379", "redis://h", "redis://h:0", "redis://h:70000",
                          "redis://h:6379/x", "redis://:6379", "rediss://h:6379"}) {
    EXPECT_EQ(ParseRedisUrl(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace rnnserve::server::store
