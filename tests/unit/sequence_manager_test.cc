#include "server/sequence_manager.h"

#include "gtest/gtest.h"

namespace rnnserve::server {
namespace {

class SequenceManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = SequenceManager::Create({.now = [this] { return now_; }});
    ASSERT_TRUE(m.ok());
    manager_ = std::move(*m);
  }
  LayerStates State(float v) {
    LayerStates s;
    s["lstm"].push_back(engine::Tensor::Float({1, 1}, {v}));
    return s;
  }
  absl::Time now_ = absl::FromUnixSeconds(1000);
  SequenceManager::Limits limits_{.max_idle = absl::Seconds(10), .max_sequences = 2};
  std::unique_ptr<SequenceManager> manager_;
};

TEST_F(SequenceManagerTest, StateCarriesFromOneChunkToTheNext) {
  auto a = manager_->Acquire("m", 7, true, nullptr, limits_);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->states.empty());
  manager_->Release("m", 7, State(3.5f), false, false);
  auto b = manager_->Acquire("m", 7, false, nullptr, limits_);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->states.at("lstm")[0].f32()[0], 3.5f);
}

TEST_F(SequenceManagerTest, StepsAddUpOverChunksAndRestartAtZero) {
  ASSERT_TRUE(manager_->Acquire("m", 7, true, nullptr, limits_).ok());
  manager_->Release("m", 7, State(1), false, false, 5);
  auto b = manager_->Acquire("m", 7, false, nullptr, limits_);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->steps, 5);
  manager_->Release("m", 7, State(2), false, false, 3);
  auto c = manager_->Acquire("m", 7, false, nullptr, limits_);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->steps, 8);
  manager_->Release("m", 7, State(3), false, false);  // a refused chunk adds nothing
  auto restarted = manager_->Acquire("m", 7, true, nullptr, limits_);
  ASSERT_TRUE(restarted.ok());
  EXPECT_EQ(restarted->steps, 0);
}

TEST_F(SequenceManagerTest, ChunkForUnknownSequenceIsInvalidArgument) {
  auto a = manager_->Acquire("m", 9, false, nullptr, limits_);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("must set start"), std::string::npos);
}

TEST_F(SequenceManagerTest, SecondChunkInFlightIsAborted) {
  ASSERT_TRUE(manager_->Acquire("m", 1, true, nullptr, limits_).ok());
  EXPECT_EQ(manager_->Acquire("m", 1, false, nullptr, limits_).status().code(),
            absl::StatusCode::kAborted);
}

TEST_F(SequenceManagerTest, IdleSequenceExpiresAfterMaxIdleNotBefore) {
  ASSERT_TRUE(manager_->Acquire("m", 1, true, nullptr, limits_).ok());
  manager_->Release("m", 1, State(1), false, false);
  now_ += absl::Seconds(10);
  EXPECT_EQ(manager_->Expire(), 0);  // exactly max_idle: still live
  now_ += absl::Microseconds(1);
  EXPECT_EQ(manager_->Expire(), 1);
  EXPECT_EQ(manager_->Acquire("m", 1, false, nullptr, limits_).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SequenceManagerTest, TooManyLiveSequencesIsResourceExhaustedPerModel) {
  ASSERT_TRUE(manager_->Acquire("m", 1, true, nullptr, limits_).ok());
  ASSERT_TRUE(manager_->Acquire("m", 2, true, nullptr, limits_).ok());
  EXPECT_EQ(manager_->Acquire("m", 3, true, nullptr, limits_).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(manager_->Acquire("other", 3, true, nullptr, limits_).ok());
  manager_->Release("m", 1, {}, true, false);  // end frees a slot
  EXPECT_TRUE(manager_->Acquire("m", 3, true, nullptr, limits_).ok());
}

TEST_F(SequenceManagerTest, FailedChunkDropsTheSequence) {
  ASSERT_TRUE(manager_->Acquire("m", 1, true, nullptr, limits_).ok());
  manager_->Release("m", 1, {}, false, true);
  EXPECT_EQ(manager_->live(), 0);
}

}  // namespace
}  // namespace rnnserve::server

namespace rnnserve::server {
namespace {

// Sequences belong to who started them: a stream, or a client's token or connection.
class SequenceOwnershipTest : public SequenceManagerTest {};

TEST_F(SequenceOwnershipTest, StartForAnotherOwnersLiveSequenceIsAlreadyExistsAndChangesNothing) {
  ASSERT_TRUE(manager_->Acquire("m", 7, true, nullptr, limits_, "alice").ok());
  manager_->Release("m", 7, State(3.5f), false, false, 4);
  auto hijack = manager_->Acquire("m", 7, true, nullptr, limits_, "mallory");
  EXPECT_EQ(hijack.status().code(), absl::StatusCode::kAlreadyExists) << hijack.status();
  auto next = manager_->Acquire("m", 7, false, nullptr, limits_, "alice");
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->states.at("lstm")[0].f32()[0], 3.5f);  // alice's state, not reset
  EXPECT_EQ(next->steps, 4);
}

TEST_F(SequenceOwnershipTest, ChunkForAnotherOwnersSequenceIsPermissionDenied) {
  ASSERT_TRUE(manager_->Acquire("m", 7, true, nullptr, limits_, "alice").ok());
  manager_->Release("m", 7, State(1.0f), false, false);
  auto other = manager_->Acquire("m", 7, false, nullptr, limits_, "mallory");
  EXPECT_EQ(other.status().code(), absl::StatusCode::kPermissionDenied) << other.status();
  // Not even an end from another owner drops it.
  EXPECT_TRUE(manager_->Acquire("m", 7, false, nullptr, limits_, "alice").ok());
}

TEST_F(SequenceOwnershipTest, TheOwnerMayRestartItsOwnSequence) {
  ASSERT_TRUE(manager_->Acquire("m", 7, true, nullptr, limits_, "alice").ok());
  manager_->Release("m", 7, State(1.0f), false, false, 3);
  auto again = manager_->Acquire("m", 7, true, nullptr, limits_, "alice");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->states.empty());
  EXPECT_EQ(again->steps, 0);
}

TEST_F(SequenceOwnershipTest, OneOwnerCannotTakeEveryPlace) {
  auto m = SequenceManager::Create({.now = [this] { return now_; }, .max_per_owner = 2});
  ASSERT_TRUE(m.ok());
  const SequenceManager::Limits roomy{.max_idle = absl::Seconds(10), .max_sequences = 4};
  for (uint64_t id : {1, 2}) {
    ASSERT_TRUE((*m)->Acquire("m", id, true, nullptr, roomy, "greedy").ok());
    (*m)->Release("m", id, State(0), false, false);
  }
  auto third = (*m)->Acquire("m", 3, true, nullptr, roomy, "greedy");
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(third.status().message().find("--max-sequences-per-client"), std::string::npos);
  // Another client still starts sequences, and the greedy one again once one of its ended.
  EXPECT_TRUE((*m)->Acquire("m", 3, true, nullptr, roomy, "polite").ok());
  (*m)->Release("m", 1, {}, /*end=*/true, false);
  EXPECT_TRUE((*m)->Acquire("m", 4, true, nullptr, roomy, "greedy").ok());
}

TEST_F(SequenceOwnershipTest, EndOwnedByEndsThatOwnersSequencesOnly) {
  for (uint64_t id : {1, 2}) {
    ASSERT_TRUE(manager_->Acquire("m", id, true, nullptr, limits_, id == 1 ? "s1" : "s2").ok());
    manager_->Release("m", id, State(0), false, false);
  }
  EXPECT_EQ(manager_->EndOwnedBy("s1"), 1);
  EXPECT_EQ(manager_->live(), 1);
  EXPECT_EQ(manager_->Acquire("m", 1, false, nullptr, limits_, "s1").status().code(),
            absl::StatusCode::kInvalidArgument);  // gone
  EXPECT_TRUE(manager_->Acquire("m", 2, false, nullptr, limits_, "s2").ok());
}

}  // namespace
}  // namespace rnnserve::server
