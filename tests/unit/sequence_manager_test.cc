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
