#include "server/sequence_manager.h"

#include <string>
#include <utility>

#include "absl/strings/str_replace.h"
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
  const SequenceManager::Caller alice_{.owner = "stream-1", .client = "peer:a"};
  const SequenceManager::Caller bob_{.owner = "stream-2", .client = "peer:b"};
  std::unique_ptr<SequenceManager> manager_;
};

TEST_F(SequenceManagerTest, StateCarriesFromOneChunkToTheNext) {
  auto a = manager_->Acquire("m", 7, true, nullptr, limits_, alice_);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->states.empty());
  EXPECT_TRUE(manager_->Release("m", 7, State(3.5f), false, false).ok());
  auto b = manager_->Acquire("m", 7, false, nullptr, limits_, alice_);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->states.at("lstm")[0].f32()[0], 3.5f);
}

TEST_F(SequenceManagerTest, StepsAddUpOverChunksAndRestartAtZero) {
  ASSERT_TRUE(manager_->Acquire("m", 7, true, nullptr, limits_, alice_).ok());
  EXPECT_TRUE(manager_->Release("m", 7, State(1), false, false, 5).ok());
  auto b = manager_->Acquire("m", 7, false, nullptr, limits_, alice_);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->steps, 5);
  EXPECT_TRUE(manager_->Release("m", 7, State(2), false, false, 3).ok());
  auto c = manager_->Acquire("m", 7, false, nullptr, limits_, alice_);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->steps, 8);
  // A failed chunk ends the sequence.
  EXPECT_TRUE(manager_->Release("m", 7, State(3), false, true).ok());
  auto restarted = manager_->Acquire("m", 7, true, nullptr, limits_, alice_);
  ASSERT_TRUE(restarted.ok());
  EXPECT_EQ(restarted->steps, 0);
}

TEST_F(SequenceManagerTest, ChunkForUnknownSequenceIsInvalidArgument) {
  auto a = manager_->Acquire("m", 9, false, nullptr, limits_, alice_);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("must set start"), std::string::npos);
}

TEST_F(SequenceManagerTest, SecondChunkInFlightIsAborted) {
  ASSERT_TRUE(manager_->Acquire("m", 1, true, nullptr, limits_, alice_).ok());
  EXPECT_EQ(manager_->Acquire("m", 1, false, nullptr, limits_, alice_).status().code(),
            absl::StatusCode::kAborted);
}

TEST_F(SequenceManagerTest, IdleSequenceExpiresAfterMaxIdleNotBefore) {
  ASSERT_TRUE(manager_->Acquire("m", 1, true, nullptr, limits_, alice_).ok());
  EXPECT_TRUE(manager_->Release("m", 1, State(1), false, false).ok());
  now_ += absl::Seconds(10);
  EXPECT_EQ(manager_->Expire(), 0);  // exactly max_idle: still live
  now_ += absl::Microseconds(1);
  EXPECT_EQ(manager_->Expire(), 1);
  EXPECT_EQ(manager_->Acquire("m", 1, false, nullptr, limits_, alice_).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SequenceManagerTest, TooManyLiveSequencesIsResourceExhaustedPerModel) {
  ASSERT_TRUE(manager_->Acquire("m", 1, true, nullptr, limits_, alice_).ok());
  ASSERT_TRUE(manager_->Acquire("m", 2, true, nullptr, limits_, alice_).ok());
  EXPECT_EQ(manager_->Acquire("m", 3, true, nullptr, limits_, alice_).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(manager_->Acquire("other", 3, true, nullptr, limits_, alice_).ok());
  EXPECT_TRUE(manager_->Release("m", 1, {}, true, false).ok());  // end frees a slot
  EXPECT_TRUE(manager_->Acquire("m", 3, true, nullptr, limits_, alice_).ok());
}

TEST_F(SequenceManagerTest, FailedChunkDropsTheSequence) {
  ASSERT_TRUE(manager_->Acquire("m", 1, true, nullptr, limits_, alice_).ok());
  EXPECT_TRUE(manager_->Release("m", 1, {}, false, true).ok());
  EXPECT_EQ(manager_->live(), 0);
}

TEST_F(SequenceManagerTest, StartForLiveSequenceIsAlreadyExistsAndKeepsItsState) {
  ASSERT_TRUE(manager_->Acquire("m", 7, true, nullptr, limits_, alice_).ok());
  EXPECT_TRUE(manager_->Release("m", 7, State(3.5f), false, false, 4).ok());
  EXPECT_EQ(manager_->Acquire("m", 7, true, nullptr, limits_, alice_).status().code(),
            absl::StatusCode::kAlreadyExists);
  auto next = manager_->Acquire("m", 7, false, nullptr, limits_, alice_);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->steps, 4);
  EXPECT_EQ(next->states.at("lstm")[0].f32()[0], 3.5f);
}

// Another owner's live id answers a chunk exactly as an id that is not live does (the same
// code and message, whether or not a chunk is in flight), and a start only that it is in use.
TEST_F(SequenceManagerTest, ChunkFromAnotherOwnerLooksLikeAnIdThatIsNotLiveAndChangesNothing) {
  const absl::Status never = manager_->Acquire("m", 8, false, nullptr, limits_, bob_).status();
  ASSERT_EQ(never.code(), absl::StatusCode::kInvalidArgument);
  const std::string not_live = std::string(never.message());
  auto said = [&](uint64_t id) {
    const absl::Status s = manager_->Acquire("m", id, false, nullptr, limits_, bob_).status();
    return std::make_pair(s.code(),
                          absl::StrReplaceAll(s.message(), {{"sequence 7 ", "sequence 8 "}}));
  };
  ASSERT_TRUE(manager_->Acquire("m", 7, true, nullptr, limits_, alice_).ok());
  EXPECT_TRUE(manager_->Release("m", 7, State(3.5f), false, false).ok());
  EXPECT_EQ(said(7), std::make_pair(absl::StatusCode::kInvalidArgument, not_live));
  const absl::Status start = manager_->Acquire("m", 7, true, nullptr, limits_, bob_).status();
  EXPECT_EQ(start.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(start.message().find("is in use; start another id"), std::string::npos) << start;
  // Even while alice's chunk is in flight, bob learns nothing more.
  ASSERT_TRUE(manager_->Acquire("m", 7, false, nullptr, limits_, alice_).ok());
  EXPECT_EQ(said(7), std::make_pair(absl::StatusCode::kInvalidArgument, not_live));
  EXPECT_TRUE(manager_->Release("m", 7, State(4.5f), false, false).ok());
  auto mine = manager_->Acquire("m", 7, false, nullptr, limits_, alice_);
  ASSERT_TRUE(mine.ok());
  EXPECT_EQ(mine->states.at("lstm")[0].f32()[0], 4.5f);
}

TEST_F(SequenceManagerTest, EndOwnerEndsOnlyThatOwnersSequences) {
  ASSERT_TRUE(manager_->Acquire("m", 1, true, nullptr, limits_, alice_).ok());
  EXPECT_TRUE(manager_->Release("m", 1, State(1), false, false).ok());
  ASSERT_TRUE(manager_->Acquire("m", 2, true, nullptr, limits_, bob_).ok());
  EXPECT_TRUE(manager_->Release("m", 2, State(2), false, false).ok());
  EXPECT_EQ(manager_->EndOwner(alice_.owner), 1);
  EXPECT_EQ(manager_->live(), 1);
  EXPECT_EQ(manager_->Acquire("m", 1, false, nullptr, limits_, alice_).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(manager_->Acquire("m", 2, false, nullptr, limits_, bob_).ok());
  // Its id is free again, for anyone.
  EXPECT_TRUE(manager_->Acquire("m", 1, true, nullptr, limits_, bob_).ok());
}

TEST(SequenceManagerQuotaTest, OneClientAtItsQuotaDoesNotLockOthersOut) {
  auto m = SequenceManager::Create({.max_sequences_per_client = 2});
  ASSERT_TRUE(m.ok());
  SequenceManager& manager = **m;
  const SequenceManager::Limits limits{.max_sequences = 4};
  const SequenceManager::Caller greedy{.owner = "g", .client = "peer:g"};
  const SequenceManager::Caller other{.owner = "o", .client = "peer:o"};
  ASSERT_TRUE(manager.Acquire("m", 1, true, nullptr, limits, greedy).ok());
  ASSERT_TRUE(manager.Acquire("m", 2, true, nullptr, limits, greedy).ok());
  auto refused = manager.Acquire("m", 3, true, nullptr, limits, greedy);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("--max-sequences-per-client=2"), std::string::npos)
      << refused.status();
  EXPECT_TRUE(manager.Acquire("m", 4, true, nullptr, limits, other).ok());
  EXPECT_TRUE(manager.Acquire("other-model", 3, true, nullptr, limits, greedy).ok());
  // Ending one frees the greedy client's slot.
  EXPECT_TRUE(manager.Release("m", 1, {}, true, false).ok());
  EXPECT_TRUE(manager.Acquire("m", 3, true, nullptr, limits, greedy).ok());
}

TEST(SequenceManagerQuotaTest, MaxSequencesIsSharedFairlyAmongClients) {
  // 10 sequences with a floor of 2 (20 %): a lone squatter leaves the last 2 for newcomers.
  auto m = SequenceManager::Create({.max_sequences_per_client = 128, .fair_floor_percent = 20});
  ASSERT_TRUE(m.ok());
  SequenceManager& manager = **m;
  const SequenceManager::Limits limits{.max_sequences = 10};
  const SequenceManager::Caller squatter{.owner = "s", .client = "token:s"};
  const SequenceManager::Caller polite{.owner = "p", .client = "token:p"};
  uint64_t id = 1;
  while (manager.Acquire("m", id, true, nullptr, limits, squatter).ok()) ++id;
  EXPECT_EQ(id - 1, 8u);
  auto refused = manager.Acquire("m", id, true, nullptr, limits, squatter);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("kept for callers below the floor"), std::string::npos)
      << refused.status();
  EXPECT_TRUE(manager.Acquire("m", 100, true, nullptr, limits, polite).ok());
  EXPECT_TRUE(manager.Acquire("m", 101, true, nullptr, limits, polite).ok());
  // The squatter is past its fair share (5 of 10 for two clients): ending one does not let it
  // start another, while a newcomer may take the freed place.
  EXPECT_TRUE(manager.Release("m", 1, {}, true, false).ok());
  refused = manager.Acquire("m", id, true, nullptr, limits, squatter);
  EXPECT_NE(refused.status().message().find("its fair share is 5"), std::string::npos)
      << refused.status();
  const SequenceManager::Caller newcomer{.owner = "n", .client = "token:n"};
  EXPECT_TRUE(manager.Acquire("m", 200, true, nullptr, limits, newcomer).ok());
}

TEST(SequenceManagerQuotaTest, PerClientQuotaMustBePositive) {
  EXPECT_EQ(SequenceManager::Create({.max_sequences_per_client = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rnnserve::server
