// Step feedback in step-level batching (server/batching/cellular_feedback.h) with the fake
// engine (batching_fake_engine.h: echo[b, t] = x[b, t, 0], h ends at h0 + the sum of x): a row
// runs its given steps, then each step the hook feeds back, from the states its slot holds; a
// row that ends, is cancelled or passes its deadline frees its slot before the next chunk.

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "server/batching/abandon_watch.h"
#include "server/batching/cellular_scheduler.h"
#include "tests/support/fake_clock.h"
#include "tests/unit/batching_fake_engine.h"
#include "tests/unit/batching_test_util.h"

namespace rnnserve {
namespace {

using server::batching::BatchRequest;
using server::batching::CellularScheduler;
using server::batching::CellularSchedulerOptions;
using server::batching::StepFeedback;
using testing::Answer;
using testing::FakeEngine;

CellularSchedulerOptions Options(int slots, int chunk_steps, bool fixed = false) {
  CellularSchedulerOptions o;
  o.model_name = "fake";
  o.max_active_sequences = slots;
  o.chunk_steps = chunk_steps;
  o.fixed_chunk_steps = fixed;
  o.shape.input_time_axis = {true};
  o.shape.output_time_axis = {true, false};  // echo [B, T, 1], summary [B, 2]
  o.shape.state_rows["rnn"] = {{1}};
  return o;
}

// Feeds back each row's last echo + 1 until it reaches the row's limit; records what it saw.
class CountUp final : public StepFeedback {
 public:
  explicit CountUp(std::vector<float> limits, std::function<void(float)> on_step = nullptr)
      : limits_(std::move(limits)), on_step_(std::move(on_step)) {}
  bool Next(int64_t row, const std::vector<engine::Tensor>& outputs,
            std::vector<engine::Tensor>* next) override {
    EXPECT_EQ(outputs.size(), 2u);
    EXPECT_EQ(outputs[0].shape(), (engine::Shape{1, 1}));  // the step's echo row, no time axis
    const float echo = outputs[0].f32()[0];
    {
      absl::MutexLock lock(&mu_);
      seen_.push_back({static_cast<float>(row), echo});
    }
    if (on_step_) on_step_(echo);
    if (echo >= limits_[row]) return false;
    next->push_back(engine::Tensor::Float({1, 1, 2}, {echo + 1, 0}));
    return true;
  }
  std::vector<std::vector<float>> seen() const {
    absl::MutexLock lock(&mu_);
    return seen_;
  }

 private:
  const std::vector<float> limits_;
  const std::function<void(float)> on_step_;
  mutable absl::Mutex mu_;
  std::vector<std::vector<float>> seen_ ABSL_GUARDED_BY(mu_);  // {row, echo}
};

// Rows of the given first steps (each row's x[t, 0]; all of one length).
std::unique_ptr<BatchRequest> Prompt(const std::vector<std::vector<float>>& rows,
                                     std::shared_ptr<Answer>* answer,
                                     engine::StateMap* final_states = nullptr) {
  auto request = std::make_unique<BatchRequest>();
  const int64_t b = static_cast<int64_t>(rows.size());
  const int64_t t = static_cast<int64_t>(rows[0].size());
  engine::Tensor x = engine::Tensor::Float({b, t, 2});
  for (int64_t r = 0; r < b; ++r) {
    for (int64_t s = 0; s < t; ++s) x.f32()[(r * t + s) * 2] = rows[r][s];
  }
  request->batch.inputs.push_back(std::move(x));
  request->batch.final_states = final_states;
  *answer = std::make_shared<Answer>();
  request->done = [a = *answer](absl::StatusOr<std::vector<engine::Tensor>> result) {
    a->result = std::move(result);
    ++a->calls;
    a->done.Notify();
  };
  return request;
}

std::vector<int32_t> Lengths(const testing::SeenBatch& b) { return b.lengths; }

TEST(CellularFeedbackTest, FedStepsRunOneAChunkFromTheSlotsStatesUntilTheHookEndsTheRow) {
  FakeEngine engine;
  auto s = CellularScheduler::Create(Options(8, 4), {&engine});
  ASSERT_TRUE(s.ok()) << s.status();
  auto hook = std::make_shared<CountUp>(std::vector<float>{8, 7});
  std::shared_ptr<Answer> answer;
  engine::StateMap states;
  // Row 0 runs 1, 2, 3 and then is fed 4..8; row 1 runs 5, 5, 5 and is fed 6, 7.
  auto request = Prompt({{1, 2, 3}, {5, 5, 5}}, &answer, &states);
  ASSERT_TRUE((*s)->ScheduleFeedback(&request, hook).ok());
  answer->done.WaitForNotification();
  ASSERT_TRUE(answer->result.ok()) << answer->result.status();
  EXPECT_TRUE(answer->result->empty());
  EXPECT_EQ(answer->calls, 1);
  // The hook saw each row's last given step, then each fed step's echo.
  std::vector<std::vector<float>> row0, row1;
  for (const auto& seen : hook->seen()) (seen[0] == 0 ? row0 : row1).push_back({seen[1]});
  EXPECT_EQ(row0, (std::vector<std::vector<float>>{{3}, {4}, {5}, {6}, {7}, {8}}));
  EXPECT_EQ(row1, (std::vector<std::vector<float>>{{5}, {6}, {7}}));
  // The states carried through every fed step: h = the sum of all the row's inputs.
  ASSERT_EQ(states["rnn"].size(), 1u);
  EXPECT_FLOAT_EQ(states["rnn"][0].f32()[0], 1 + 2 + 3 + 4 + 5 + 6 + 7 + 8);
  EXPECT_FLOAT_EQ(states["rnn"][0].f32()[1], 5 * 3 + 6 + 7);
  // The given steps in one chunk, then one step a chunk; row 1's slot left after its 7.
  const auto seen = engine.seen();
  ASSERT_EQ(seen.size(), 6u);
  EXPECT_EQ(Lengths(seen[0]), (std::vector<int32_t>{3, 3}));
  EXPECT_EQ(seen[1].first_steps, (std::vector<float>{4, 6}));
  EXPECT_EQ(seen[1].input_shape, (engine::Shape{2, 1, 2}));
  EXPECT_EQ(seen[2].first_steps, (std::vector<float>{5, 7}));
  for (size_t c = 3; c < 6; ++c) EXPECT_EQ(seen[c].first_steps, (std::vector<float>{3.0f + c}));
  (*s)->Drain();
  EXPECT_EQ((*s)->active(), 0);
}

TEST(CellularFeedbackTest, FedRowsShareChunksWithOtherSequences) {
  FakeEngine engine;
  // Fixed chunks of 4 (the GPU's): a chunk of fed rows only runs one step.
  auto s = CellularScheduler::Create(Options(8, 4, /*fixed=*/true), {&engine});
  ASSERT_TRUE(s.ok());
  engine.Gate();
  std::shared_ptr<Answer> fed_answer, plain_answer;
  auto hook = std::make_shared<CountUp>(std::vector<float>{103});
  auto fed = Prompt({{100}}, &fed_answer);
  ASSERT_TRUE((*s)->ScheduleFeedback(&fed, hook).ok());
  engine.AwaitCalls(1);
  auto plain = testing::MakeRequest({.id = 200, .steps = 6}, &plain_answer);
  ASSERT_TRUE((*s)->Schedule(&plain).ok());
  engine.Open();
  fed_answer->done.WaitForNotification();
  plain_answer->done.WaitForNotification();
  ASSERT_TRUE(fed_answer->result.ok());
  ASSERT_TRUE(plain_answer->result.ok());
  const engine::Tensor& echo = (*plain_answer->result)[0];
  ASSERT_EQ(echo.shape(), (engine::Shape{1, 6, 1}));
  for (int64_t t = 0; t < 6; ++t) EXPECT_FLOAT_EQ(echo.f32()[t], testing::Value(200, 0, t));
  const auto seen = engine.seen();
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0].input_shape, (engine::Shape{1, 4, 2}));   // the given step
  EXPECT_EQ(Lengths(seen[1]), (std::vector<int32_t>{1, 4}));  // fed 101 beside 200's first 4
  EXPECT_EQ(Lengths(seen[2]), (std::vector<int32_t>{1, 2}));  // fed 102, 200's last 2
  EXPECT_EQ(seen[3].input_shape, (engine::Shape{1, 1, 2}));   // fed 103 alone: one step
  EXPECT_EQ(seen[3].first_steps, (std::vector<float>{103}));
}

TEST(CellularFeedbackTest, CancelledOrExpiredRowLeavesItsSlotBeforeTheNextChunk) {
  server::batching::FakeClock clock;
  FakeEngine engine;
  auto s = CellularScheduler::Create(Options(1, 4), {&engine}, &clock);
  ASSERT_TRUE(s.ok());
  // A row that would never end: its client cancels after the hook saw 3.
  std::atomic<bool> cancelled{false};
  auto endless = std::make_shared<CountUp>(std::vector<float>{1e9},
                                           [&](float echo) { cancelled = echo >= 3; });
  std::shared_ptr<Answer> gone;
  auto request = Prompt({{1}}, &gone);
  request->cancelled = [&cancelled] { return cancelled.load(); };
  ASSERT_TRUE((*s)->ScheduleFeedback(&request, endless).ok());
  gone->done.WaitForNotification();
  EXPECT_EQ(gone->result.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(engine.calls(), 3);  // 1, 2, 3: the fed 4 never ran
  // One whose deadline passes after the hook saw 12: the one slot is free for it.
  auto late = std::make_shared<CountUp>(std::vector<float>{1e9}, [&](float echo) {
    if (echo == 12) clock.AdvanceMicros(11);
  });
  std::shared_ptr<Answer> expired;
  request = Prompt({{10}}, &expired);
  request->deadline = clock.Now() + absl::Microseconds(10);
  ASSERT_TRUE((*s)->ScheduleFeedback(&request, late).ok());
  expired->done.WaitForNotification();
  EXPECT_EQ(expired->result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(engine.calls(), 6);  // 10, 11, 12
  // A hook whose input does not fit fails its request alone (INTERNAL).
  class Bad final : public StepFeedback {
    bool Next(int64_t, const std::vector<engine::Tensor>&,
              std::vector<engine::Tensor>* next) override {
      next->push_back(engine::Tensor::Float({1, 2, 2}));
      return true;
    }
  };
  std::shared_ptr<Answer> bad;
  request = Prompt({{1}}, &bad);
  ASSERT_TRUE((*s)->ScheduleFeedback(&request, std::make_shared<Bad>()).ok());
  bad->done.WaitForNotification();
  EXPECT_EQ(bad->result.status().code(), absl::StatusCode::kInternal) << bad->result.status();
  (*s)->Drain();
  EXPECT_EQ((*s)->active(), 0);
}

// A generation holds the one slot for as long as it runs: a request queued behind it whose
// client cancels is answered at the next sweep of the queue, not when the slot frees.
TEST(CellularFeedbackTest, QueuedRequestWhoseClientCancelsIsAnsweredWhileTheSlotStaysTaken) {
  server::batching::FakeClock clock;
  FakeEngine engine;
  auto s = CellularScheduler::Create(Options(1, 4), {&engine}, &clock);
  ASSERT_TRUE(s.ok());
  std::shared_ptr<Answer> queued;
  std::atomic<bool> cancelled{false};
  // The running row cancels the queued request after it saw 5 (and time moves past a poll
  // interval); it ends once that one has been answered, or at 1000.
  auto hook = std::make_shared<CountUp>(std::vector<float>{1000}, [&](float echo) {
    if (echo == 5) {
      cancelled = true;
      clock.AdvanceMicros(absl::ToInt64Microseconds(server::batching::kAbandonPollInterval) + 1);
    }
  });
  class UntilAnswered final : public StepFeedback {
   public:
    UntilAnswered(std::shared_ptr<CountUp> inner, std::shared_ptr<Answer>* other)
        : inner_(std::move(inner)), other_(other) {}
    bool Next(int64_t row, const std::vector<engine::Tensor>& outputs,
              std::vector<engine::Tensor>* next) override {
      if (*other_ != nullptr && (*other_)->done.HasBeenNotified()) return false;
      return inner_->Next(row, outputs, next);
    }

   private:
    const std::shared_ptr<CountUp> inner_;
    std::shared_ptr<Answer>* const other_;
  };
  std::shared_ptr<Answer> running;
  auto request = Prompt({{1}}, &running);
  auto wait = testing::MakeRequest({.id = 100, .steps = 4}, &queued);
  wait->cancelled = [&cancelled] { return cancelled.load(); };
  ASSERT_TRUE(
      (*s)->ScheduleFeedback(&request, std::make_shared<UntilAnswered>(hook, &queued)).ok());
  ASSERT_TRUE((*s)->Schedule(&wait).ok());
  running->done.WaitForNotification();
  ASSERT_TRUE(running->result.ok()) << running->result.status();
  queued->done.WaitForNotification();
  EXPECT_EQ(queued->result.status().code(), absl::StatusCode::kCancelled);
  const auto seen = hook->seen();
  ASSERT_FALSE(seen.empty());
  EXPECT_LT(seen.back()[1], 10);  // answered within a chunk or two of its cancel
  for (const auto& b : engine.seen()) EXPECT_EQ(b.first_steps.size(), 1u);  // never ran
}

TEST(CellularFeedbackTest, RequestsWithoutStepsOrWithLengthsAreRefusedAndStayWithTheCaller) {
  FakeEngine engine;
  auto s = CellularScheduler::Create(Options(2, 4), {&engine});
  ASSERT_TRUE(s.ok());
  std::shared_ptr<Answer> answer;
  auto request = testing::MakeRequest({.id = 100, .steps = 3, .lengths = {2}}, &answer);
  EXPECT_EQ(
      (*s)->ScheduleFeedback(&request, std::make_shared<CountUp>(std::vector<float>{1})).code(),
      absl::StatusCode::kInvalidArgument);
  ASSERT_NE(request, nullptr);
  request = testing::MakeRequest({.id = 100, .steps = 0}, &answer);
  EXPECT_EQ(
      (*s)->ScheduleFeedback(&request, std::make_shared<CountUp>(std::vector<float>{1})).code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*s)->ScheduleFeedback(&request, nullptr).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_NE(request, nullptr);
  EXPECT_FALSE(answer->done.HasBeenNotified());
}

}  // namespace
}  // namespace rnnserve
