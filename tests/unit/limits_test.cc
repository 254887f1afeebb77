// The bounded-resource classes of server/limits/: the request byte budget, the per-model
// concurrency cap, the stream cap with idle close, the caller identity, the fair shares of
// each among callers, and the working-memory estimate of a batch.

#include "gtest/gtest.h"
#include "server/limits/byte_budget.h"
#include "server/limits/caller_identity.h"
#include "server/limits/model_concurrency.h"
#include "server/limits/stream_limits.h"
#include "server/limits/working_memory.h"

namespace rnnserve::server::limits {
namespace {

// The bound alone: fair shares off (first come, first served), one caller.
std::unique_ptr<ByteBudget> Budget(int64_t max, int floor_percent = 100) {
  auto b = ByteBudget::Create({.max_inflight_bytes = max, .fair_floor_percent = floor_percent});
  EXPECT_TRUE(b.ok()) << b.status();
  return *std::move(b);
}

TEST(ByteBudgetTest, OverBudgetIsResourceExhaustedNamingAskedBudgetAndInFlight) {
  auto budget = Budget(1000);
  auto first = budget->Reserve("c", 600);
  ASSERT_TRUE(first.ok());
  auto second = budget->Reserve("c", 500);
  ASSERT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string message(second.status().message());
  EXPECT_NE(message.find("needs 500 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("600 of the --max-inflight-bytes=1000"), std::string::npos) << message;
  EXPECT_EQ(budget->inflight_bytes(), 600);     // the refused request holds nothing
  EXPECT_TRUE(budget->Reserve("c", 400).ok());  // exactly the rest fits (and is released here)
}

TEST(ByteBudgetTest, ReleasedReservationFreesItsBytes) {
  auto budget = Budget(1000);
  {
    auto r = budget->Reserve("c", 900);
    ASSERT_TRUE(r.ok());
    ASSERT_TRUE(r->Add(100).ok());
    EXPECT_EQ(r->Add(1).code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(r->bytes(), 1000);
    ByteBudget::Reservation moved = *std::move(r);
    EXPECT_EQ(budget->inflight_bytes(), 1000);
  }
  EXPECT_EQ(budget->inflight_bytes(), 0);
  EXPECT_TRUE(budget->Reserve("c", 1000).ok());
}

TEST(ByteBudgetTest, RequestLargerThanTheWholeBudgetIsRefused) {
  auto budget = Budget(1000);
  EXPECT_EQ(budget->Reserve("c", 1001).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(budget->inflight_bytes(), 0);
}

TEST(ByteBudgetTest, BudgetMustBePositive) {
  EXPECT_EQ(ByteBudget::Create({.max_inflight_bytes = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ByteBudgetTest, NoBudgetReservesNothingAndAlwaysSucceeds) {
  auto r = ReserveIn(nullptr, "c", int64_t{1} << 40);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->Add(1).ok());
}

TEST(ModelConcurrencyTest, OverTheCapIsRefusedAtOncePerModel) {
  auto c = ModelConcurrency::Create({.max_concurrent_per_model = 2, .fair_floor_percent = 100});
  ASSERT_TRUE(c.ok());
  int a = 0, b = 0;
  auto s1 = (*c)->Acquire(&a, "a", 1, "c");
  auto s2 = (*c)->Acquire(&a, "a", 1, "c");
  ASSERT_TRUE(s1.ok() && s2.ok());
  auto refused = (*c)->Acquire(&a, "a", 1, "c");
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("--max-concurrent-per-model=2"), std::string::npos);
  EXPECT_TRUE((*c)->Acquire(&b, "b", 1, "c").ok());  // another model is not affected
  s1->Release();
  EXPECT_TRUE((*c)->Acquire(&a, "a", 1, "c").ok());
}

TEST(ModelConcurrencyTest, ZeroMeansEightPerInstanceAndTheNewcomersReserve) {
  auto c = ModelConcurrency::Create({});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->LimitFor(1), 9);     // 8, and one kept for a new caller (6% of 8, at least 1)
  EXPECT_EQ((*c)->LimitFor(3), 25);    // 24 + 1
  EXPECT_EQ((*c)->LimitFor(50), 424);  // 400 + 24
  auto first_come = ModelConcurrency::Create({.fair_floor_percent = 100});
  ASSERT_TRUE(first_come.ok());
  EXPECT_EQ((*first_come)->LimitFor(1), 8);
  EXPECT_EQ(ModelConcurrency::Create({.max_concurrent_per_model = -1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

class StreamLimitsTest : public ::testing::Test {
 protected:
  std::unique_ptr<StreamLimits> Make(int max_streams, int idle_seconds, int floor_percent = 100) {
    auto s = StreamLimits::Create({.max_streams = max_streams,
                                   .idle_seconds = idle_seconds,
                                   .now = [this] { return now_; },
                                   .reaper_thread = false,
                                   .fair_floor_percent = floor_percent});
    EXPECT_TRUE(s.ok()) << s.status();
    return *std::move(s);
  }
  absl::Time now_ = absl::FromUnixSeconds(1000);
};

TEST_F(StreamLimitsTest, StreamOverTheCapIsResourceExhaustedUntilOneCloses) {
  auto limits = Make(2, 0);
  auto a = limits->Open(nullptr, "c");
  auto b = limits->Open(nullptr, "c");
  ASSERT_TRUE(a.ok() && b.ok());
  auto c = limits->Open(nullptr, "c");
  ASSERT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(c.status().message().find("--max-streams=2"), std::string::npos);
  a->Close();
  EXPECT_EQ(limits->open(), 1);
  EXPECT_TRUE(limits->Open(nullptr, "c").ok());
}

TEST_F(StreamLimitsTest, IdleStreamIsReapedAfterTheTimeoutNotBeforeNorWhileBusy) {
  auto limits = Make(4, 10);
  auto idle = limits->Open(nullptr, "c");
  auto busy = limits->Open(nullptr, "c");
  ASSERT_TRUE(idle.ok() && busy.ok());
  busy->Busy(true);
  now_ += absl::Seconds(10);
  EXPECT_EQ(limits->Reap(), 0);  // exactly the timeout: still open
  now_ += absl::Seconds(1);
  EXPECT_EQ(limits->Reap(), 1);
  EXPECT_TRUE(idle->reaped());
  EXPECT_FALSE(busy->reaped());
  busy->Busy(false);  // idle from now on
  now_ += absl::Seconds(5);
  EXPECT_EQ(limits->Reap(), 0);
}

TEST_F(StreamLimitsTest, ReapedStreamReleasesWhatItHoldsOnceBeforeItIsCancelled) {
  auto limits = Make(4, 10);
  int released_idle = 0, released_busy = 0;
  auto idle = limits->Open(nullptr, "c", [&] { ++released_idle; });
  auto busy = limits->Open(nullptr, "c", [&] { ++released_busy; });
  ASSERT_TRUE(idle.ok() && busy.ok());
  busy->Busy(true);
  now_ += absl::Seconds(11);
  EXPECT_EQ(limits->Reap(), 1);
  EXPECT_EQ(limits->Reap(), 0);  // reaped once
  EXPECT_EQ(released_idle, 1);
  EXPECT_EQ(released_busy, 0);
  idle->Close();  // closing normally runs nothing more: the stream's owner ends its own
  busy->Close();
  EXPECT_EQ(released_idle, 1);
  EXPECT_EQ(released_busy, 0);
}

TEST_F(StreamLimitsTest, ZeroIdleSecondsNeverCloses) {
  auto limits = Make(4, 0);
  auto s = limits->Open(nullptr, "c");
  now_ += absl::Hours(1000);
  EXPECT_EQ(limits->Reap(), 0);
}

TEST(CallerIdentityTest, TokenIsHashedAndNeverAppears) {
  const std::string id = CallerIdentity("Bearer s3cret-token", "ipv4:127.0.0.1:5000");
  EXPECT_EQ(id.rfind("token:", 0), 0u);
  EXPECT_EQ(id.find("s3cret"), std::string::npos);
  EXPECT_EQ(id, CallerIdentity("Bearer s3cret-token", "ipv4:10.0.0.1:1"));  // same token
  EXPECT_NE(id, CallerIdentity("Bearer other", "ipv4:127.0.0.1:5000"));
  EXPECT_EQ(CallerIdentity("", "ipv4:127.0.0.1:5000"), "peer:ipv4:127.0.0.1:5000");
}

}  // namespace
}  // namespace rnnserve::server::limits

namespace rnnserve::server::limits {
namespace {

TEST(ByteBudgetTest, HeavyCallerIsRefusedPastItsShareWhileALightOneIsServed) {
  auto budget = Budget(1000, /*floor_percent=*/10);  // floor 100
  std::vector<ByteBudget::Reservation> heavy;
  for (int i = 0; i < 20; ++i) {
    auto r = budget->Reserve("token:heavy", 100);
    if (r.ok()) heavy.push_back(*std::move(r));
  }
  EXPECT_EQ(heavy.size(), 9u);  // the last 100 stay for callers below the floor
  auto light = budget->Reserve("token:light", 100);
  ASSERT_TRUE(light.ok()) << light.status();
  heavy.pop_back();
  heavy.pop_back();
  // Two callers hold some: the heavy one's share is 500 and it holds 700.
  auto refused = budget->Reserve("token:heavy", 100);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("its fair share is 500 (1000 shared by 2 active "
                                            "callers"),
            std::string::npos)
      << refused.status();
  EXPECT_TRUE(budget->Reserve("token:light", 100).ok());
}

TEST(ByteBudgetTest, ConnectionsOfOneHostShareOneShare) {
  auto budget = Budget(1000, /*floor_percent=*/10);
  auto a = budget->Reserve("peer:ipv4:10.0.0.7:4001", 600);
  ASSERT_TRUE(a.ok());
  // Another connection of the same host is the same caller: past the reserve.
  EXPECT_EQ(budget->Reserve("peer:ipv4:10.0.0.7:4002", 350).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(budget->Reserve("peer:ipv4:10.0.0.8:4001", 350).ok());
}

TEST(ModelConcurrencyTest, CapIsSharedAmongCallersNamingTheShare) {
  auto c = ModelConcurrency::Create({.max_concurrent_per_model = 8});  // floor 1 (6%)
  ASSERT_TRUE(c.ok());
  int model = 0;
  std::vector<ModelConcurrency::Slot> heavy;
  for (int i = 0; i < 16; ++i) {
    auto s = (*c)->Acquire(&model, "m", 1, "token:heavy");
    if (s.ok()) heavy.push_back(*std::move(s));
  }
  EXPECT_EQ(heavy.size(), 7u);
  auto polite = (*c)->Acquire(&model, "m", 1, "token:polite");
  ASSERT_TRUE(polite.ok()) << polite.status();
  heavy.resize(3);
  auto back = (*c)->Acquire(&model, "m", 1, "token:heavy");
  ASSERT_TRUE(back.ok());
  auto over = (*c)->Acquire(&model, "m", 1, "token:heavy");
  ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over.status().message().find("--max-concurrent-per-model=8); this caller holds 4 and "
                                         "its fair share is 4"),
            std::string::npos)
      << over.status();
  EXPECT_EQ(ModelConcurrency::Create({.fair_floor_percent = 101}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(StreamLimitsTest, OneCallerCannotHoldEveryStream) {
  auto limits = Make(16, 0, /*floor_percent=*/6);  // floor 1
  std::vector<StreamLimits::Ticket> greedy;
  for (int i = 0; i < 16; ++i) {
    auto t = limits->Open(nullptr, "peer:ipv4:127.0.0.1:" + std::to_string(5000 + i));
    if (t.ok()) greedy.push_back(*std::move(t));
  }
  EXPECT_EQ(greedy.size(), 15u);
  auto other = limits->Open(nullptr, "token:other");
  ASSERT_TRUE(other.ok()) << other.status();
  greedy.pop_back();
  // Two callers: the greedy one (14 open) is past its share of 8.
  auto refused = limits->Open(nullptr, "peer:ipv4:127.0.0.1:6000");
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("its fair share is 8"), std::string::npos)
      << refused.status();
  greedy.resize(8);  // back to its share: still refused, while the other opens more
  EXPECT_FALSE(limits->Open(nullptr, "peer:ipv4:127.0.0.1:6001").ok());
  EXPECT_TRUE(limits->Open(nullptr, "token:other").ok());
}

TEST(CallerIdentityTest, ShareKeyDropsThePeersPortOnly) {
  EXPECT_EQ(ShareKey("peer:ipv4:127.0.0.1:5000"), "peer:ipv4:127.0.0.1");
  EXPECT_EQ(ShareKey("peer:ipv6:[::1]:5000"), "peer:ipv6:[::1]");
  EXPECT_EQ(ShareKey("peer:ipv6:%5B::1%5D:5000"), "peer:ipv6:%5B::1%5D");
  EXPECT_EQ(ShareKey("peer:ipv4:127.0.0.1"), "peer:ipv4:127.0.0.1");  // idempotent
  EXPECT_EQ(ShareKey("peer:ipv6:[::1]"), "peer:ipv6:[::1]");
  EXPECT_EQ(ShareKey("peer:unix:/tmp/s"), "peer:unix:/tmp/s");
  const std::string token = CallerIdentity("Bearer t", "ipv4:127.0.0.1:1");
  EXPECT_EQ(ShareKey(token), token);
}

TEST(WorkingMemoryTest, EstimateCountsEachRecurrentLayersProjectionsAndOutputsPerStep) {
  engine::Model ir;
  engine::RecurrentSpec lstm;
  lstm.cell = engine::CellType::kLstm;
  lstm.input_size = 2;
  lstm.hidden_size = 16;
  lstm.directions.resize(2);  // bidirectional
  engine::DenseSpec dense;
  dense.in = 32;
  dense.out = 3;
  ir.layers.push_back({.name = "lstm", .spec = lstm});
  ir.layers.push_back({.name = "dense", .spec = dense});
  engine::Batch batch;
  batch.inputs.push_back(engine::Tensor::Float({4, 100, 2}));
  // 400 positions x (2 x (4 x 16 + 16) + 3) floats.
  EXPECT_EQ(WorkingBytes(ir, batch), 4 * 400 * (2 * (4 * 16 + 16) + 3));
}

}  // namespace
}  // namespace rnnserve::server::limits
