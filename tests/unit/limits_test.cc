// The bounded-resource classes of server/limits/: the request byte budget, the per-model
// concurrency cap, the stream cap with idle close, and the caller identity.

#include "gtest/gtest.h"
#include "server/limits/byte_budget.h"
#include "server/limits/caller_identity.h"
#include "server/limits/model_concurrency.h"
#include "server/limits/stream_limits.h"

namespace rnnserve::server::limits {
namespace {

std::unique_ptr<ByteBudget> Budget(int64_t max) {
  auto b = ByteBudget::Create({.max_inflight_bytes = max});
  EXPECT_TRUE(b.ok()) << b.status();
  return *std::move(b);
}

TEST(ByteBudgetTest, OverBudgetIsResourceExhaustedNamingAskedBudgetAndInFlight) {
  auto budget = Budget(1000);
  auto first = budget->Reserve(600);
  ASSERT_TRUE(first.ok());
  auto second = budget->Reserve(500);
  ASSERT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string message(second.status().message());
  EXPECT_NE(message.find("needs 500 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("600 of the --max-inflight-bytes=1000"), std::string::npos) << message;
  EXPECT_EQ(budget->inflight_bytes(), 600);  // the refused request holds nothing
  EXPECT_TRUE(budget->Reserve(400).ok());    // exactly the rest fits (and is released here)
}

TEST(ByteBudgetTest, ReleasedReservationFreesItsBytes) {
  auto budget = Budget(1000);
  {
    auto r = budget->Reserve(900);
    ASSERT_TRUE(r.ok());
    ASSERT_TRUE(r->Add(100).ok());
    EXPECT_EQ(r->Add(1).code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(r->bytes(), 1000);
    ByteBudget::Reservation moved = *std::move(r);
    EXPECT_EQ(budget->inflight_bytes(), 1000);
  }
  EXPECT_EQ(budget->inflight_bytes(), 0);
  EXPECT_TRUE(budget->Reserve(1000).ok());
}

TEST(ByteBudgetTest, RequestLargerThanTheWholeBudgetIsRefused) {
  auto budget = Budget(1000);
  EXPECT_EQ(budget->Reserve(1001).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(budget->inflight_bytes(), 0);
}

TEST(ByteBudgetTest, BudgetMustBePositive) {
  EXPECT_EQ(ByteBudget::Create({.max_inflight_bytes = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ByteBudgetTest, NoBudgetReservesNothingAndAlwaysSucceeds) {
  auto r = ReserveIn(nullptr, int64_t{1} << 40);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->Add(1).ok());
}

TEST(ModelConcurrencyTest, OverTheCapIsRefusedAtOncePerModel) {
  auto c = ModelConcurrency::Create({.max_concurrent_per_model = 2});
  ASSERT_TRUE(c.ok());
  int a = 0, b = 0;
  auto s1 = (*c)->Acquire(&a, "a", 1);
  auto s2 = (*c)->Acquire(&a, "a", 1);
  ASSERT_TRUE(s1.ok() && s2.ok());
  auto refused = (*c)->Acquire(&a, "a", 1);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("--max-concurrent-per-model=2"), std::string::npos);
  EXPECT_TRUE((*c)->Acquire(&b, "b", 1).ok());  // another model is not affected
  s1->Release();
  EXPECT_TRUE((*c)->Acquire(&a, "a", 1).ok());
}

TEST(ModelConcurrencyTest, ZeroMeansEightPerInstance) {
  auto c = ModelConcurrency::Create({});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->LimitFor(1), 8);
  EXPECT_EQ((*c)->LimitFor(3), 24);
  EXPECT_EQ(ModelConcurrency::Create({.max_concurrent_per_model = -1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

class StreamLimitsTest : public ::testing::Test {
 protected:
  std::unique_ptr<StreamLimits> Make(int max_streams, int idle_seconds) {
    auto s = StreamLimits::Create({.max_streams = max_streams,
                                   .idle_seconds = idle_seconds,
                                   .now = [this] { return now_; },
                                   .reaper_thread = false});
    EXPECT_TRUE(s.ok()) << s.status();
    return *std::move(s);
  }
  absl::Time now_ = absl::FromUnixSeconds(1000);
};

TEST_F(StreamLimitsTest, StreamOverTheCapIsResourceExhaustedUntilOneCloses) {
  auto limits = Make(2, 0);
  auto a = limits->Open(nullptr);
  auto b = limits->Open(nullptr);
  ASSERT_TRUE(a.ok() && b.ok());
  auto c = limits->Open(nullptr);
  ASSERT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(c.status().message().find("--max-streams=2"), std::string::npos);
  a->Close();
  EXPECT_EQ(limits->open(), 1);
  EXPECT_TRUE(limits->Open(nullptr).ok());
}

TEST_F(StreamLimitsTest, IdleStreamIsReapedAfterTheTimeoutNotBeforeNorWhileBusy) {
  auto limits = Make(4, 10);
  auto idle = limits->Open(nullptr);
  auto busy = limits->Open(nullptr);
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
  auto idle = limits->Open(nullptr, [&] { ++released_idle; });
  auto busy = limits->Open(nullptr, [&] { ++released_busy; });
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
  auto s = limits->Open(nullptr);
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
