// DynamicBatcher with its worker threads, a fake clock and a fake engine: every boundary is
// reached by advancing the clock, never by sleeping. Waiting on an answer blocks on the
// answer itself.

#include "server/batching/dynamic_batcher.h"

#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/fake_clock.h"
#include "tests/unit/batching_fake_engine.h"
#include "tests/unit/batching_test_util.h"

namespace rnnserve::testing {
namespace {

using server::batching::BatchStats;
using server::batching::DynamicBatcher;
using server::batching::DynamicBatcherOptions;
using server::batching::FakeClock;

// Triton's waiting rule, which most tests below pin down; WorkConserving() is the default.
DynamicBatcherOptions Options() {
  return {.model_name = "m",
          .max_batch_size = 4,
          .wait_when_idle = true,
          .max_queue_delay_us = 10,
          .input_time_axis = {true},
          .output_time_axis = {true, false}};
}

DynamicBatcherOptions WorkConserving() {
  DynamicBatcherOptions o = Options();
  o.wait_when_idle = false;
  o.max_queue_delay_us = 1'000'000;  // plays no part: a test would hang on it
  o.preferred_batch_sizes = {2};
  return o;
}

class DynamicBatcherTest : public ::testing::Test {
 protected:
  void Start(const DynamicBatcherOptions& o, int instances = 1) {
    for (int i = 0; i < instances; ++i) engines_.push_back(std::make_unique<FakeEngine>());
    std::vector<engine::CompiledModel*> raw;
    for (auto& e : engines_) raw.push_back(e.get());
    auto b = DynamicBatcher::Create(o, raw, &clock_);
    ASSERT_TRUE(b.ok()) << b.status();
    batcher_ = std::move(*b);
  }
  std::shared_ptr<Answer> Schedule(const RequestSpec& spec) {
    std::shared_ptr<Answer> a;
    auto r = MakeRequest(spec, &a);
    const absl::Status s = batcher_->Schedule(&r);
    EXPECT_TRUE(s.ok()) << s;
    return a;
  }
  FakeEngine& engine(int i = 0) { return *engines_[i]; }

  FakeClock clock_;
  std::vector<std::unique_ptr<FakeEngine>> engines_;
  std::unique_ptr<DynamicBatcher> batcher_;  // after engines_: destroyed first
};

TEST_F(DynamicBatcherTest, DelayExpiryRunsTheBatchAtTenMicrosecondsNotNine) {
  Start(Options());
  clock_.AwaitSleeps(1);  // the worker sleeps on the empty queue
  const RequestSpec spec{.id = 100};
  auto a = Schedule(spec);
  clock_.AwaitSleeps(2);  // it saw the request and sleeps until the head's delay is over
  clock_.AdvanceMicros(9);
  EXPECT_EQ(engine().calls(), 0);
  EXPECT_FALSE(a->done.HasBeenNotified());
  clock_.AdvanceMicros(1);
  a->done.WaitForNotification();
  EXPECT_TRUE(IsOwnAnswer(*a, spec));
  EXPECT_EQ(engine().calls(), 1);
}

TEST_F(DynamicBatcherTest, MaxBatchSizeReachedRunsWithoutTheClockMoving) {
  Start(Options());
  std::vector<RequestSpec> specs;
  std::vector<std::shared_ptr<Answer>> answers;
  for (int i = 1; i <= 4; ++i) {
    specs.push_back({.id = 100.0f * i});
    answers.push_back(Schedule(specs.back()));
  }
  for (size_t i = 0; i < answers.size(); ++i) {
    answers[i]->done.WaitForNotification();
    EXPECT_TRUE(IsOwnAnswer(*answers[i], specs[i]));
  }
  ASSERT_EQ(engine().calls(), 1);
  EXPECT_EQ(engine().seen()[0].first_steps, (std::vector<float>{100, 200, 300, 400}));
}

TEST_F(DynamicBatcherTest, PreferredBatchSizeRunsWithoutTheClockMoving) {
  DynamicBatcherOptions o = Options();
  o.max_batch_size = 8;
  o.preferred_batch_sizes = {2};
  Start(o);
  auto a = Schedule({.id = 100});
  auto b = Schedule({.id = 200});
  a->done.WaitForNotification();
  b->done.WaitForNotification();
  ASSERT_EQ(engine().calls(), 1);
  EXPECT_EQ(engine().seen()[0].first_steps, (std::vector<float>{100, 200}));
}

TEST_F(DynamicBatcherTest, DeadlinePassedInTheQueueIsDeadlineExceededAndCostsNoCompute) {
  Start(Options());
  clock_.AwaitSleeps(1);
  auto a = Schedule({.id = 100, .deadline = clock_.Now() + absl::Microseconds(5)});
  clock_.AwaitSleeps(2);
  clock_.AdvanceMicros(4);
  EXPECT_FALSE(a->done.HasBeenNotified());
  clock_.AdvanceMicros(1);
  a->done.WaitForNotification();
  EXPECT_EQ(a->result.status().code(), absl::StatusCode::kDeadlineExceeded) << a->result.status();
  clock_.AdvanceMicros(100);
  batcher_->Drain();
  EXPECT_EQ(engine().calls(), 0);
  EXPECT_EQ(batcher_->counters().requests_expired, 1);
}

TEST_F(DynamicBatcherTest, FullQueueIsResourceExhaustedAndTheCallerKeepsTheRequest) {
  DynamicBatcherOptions o = Options();
  o.max_queue_size = 1;
  Start(o);
  Schedule({.id = 100});
  std::shared_ptr<Answer> a;
  auto r = MakeRequest({.id = 200}, &a);
  const absl::Status s = batcher_->Schedule(&r);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(r, nullptr);
  EXPECT_FALSE(a->done.HasBeenNotified());
  EXPECT_EQ(batcher_->counters().requests_rejected, 1);
}

TEST_F(DynamicBatcherTest, HigherPriorityRunsFirstWhenTheInstanceFrees) {
  DynamicBatcherOptions o = Options();
  o.max_batch_size = 1;
  o.priority_levels = 2;
  o.default_priority_level = 2;
  Start(o);
  engine().Gate();
  auto busy = Schedule({.id = 100});
  engine().AwaitCalls(1);  // the only instance is busy
  auto low = Schedule({.id = 200, .priority = 2});
  auto high = Schedule({.id = 300, .priority = 1});
  engine().Open();
  low->done.WaitForNotification();
  high->done.WaitForNotification();
  ASSERT_EQ(engine().calls(), 3);
  EXPECT_EQ(engine().seen()[1].first_steps, (std::vector<float>{300}));
  EXPECT_EQ(engine().seen()[2].first_steps, (std::vector<float>{200}));
}

TEST_F(DynamicBatcherTest, OversizedRequestIsSplitAndReassembledInOrder) {
  Start(Options());
  clock_.AwaitSleeps(1);
  const RequestSpec spec{.id = 100, .rows = 10, .steps = 3};
  auto a = Schedule(spec);
  engine().AwaitCalls(2);  // two full batches run at once
  clock_.AwaitSleeps(2);   // the two-row tail waits for the delay
  clock_.AdvanceMicros(10);
  a->done.WaitForNotification();
  EXPECT_TRUE(IsOwnAnswer(*a, spec));
  const auto seen = engine().seen();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].input_shape, (engine::Shape{4, 3, 2}));
  EXPECT_EQ(seen[2].first_steps, (std::vector<float>{108, 109}));
}

TEST_F(DynamicBatcherTest, MixedLengthsShareABatchAndEachRequestGetsItsOwnRows) {
  DynamicBatcherOptions o = Options();
  o.max_batch_size = 8;
  o.max_computed_steps_ratio = 0;
  Start(o);
  clock_.AwaitSleeps(1);
  const std::vector<RequestSpec> specs = {
      {.id = 100, .rows = 2, .steps = 5},
      {.id = 200, .rows = 1, .steps = 3, .lengths = {2}},
      {.id = 300, .rows = 3, .steps = 4, .lengths = {4, 1, 3}},
  };
  std::vector<std::shared_ptr<Answer>> answers;
  for (const auto& s : specs) answers.push_back(Schedule(s));
  clock_.AwaitSleeps(2);
  clock_.AdvanceMicros(10);
  for (size_t i = 0; i < specs.size(); ++i) {
    answers[i]->done.WaitForNotification();
    EXPECT_TRUE(IsOwnAnswer(*answers[i], specs[i]));
  }
  const auto seen = engine().seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].input_shape, (engine::Shape{6, 5, 2}));  // padded to the longest T
  EXPECT_EQ(seen[0].lengths, (std::vector<int32_t>{5, 5, 2, 4, 1, 3}));
}

// The final states a request got: rnn's h, one per row.
std::vector<float> FinalHs(const std::map<std::string, std::vector<engine::Tensor>>& states) {
  const engine::Tensor& h = states.at("rnn").at(0);
  return std::vector<float>(h.f32(), h.f32() + h.num_elements());
}

TEST_F(DynamicBatcherTest, StatefulChunksShareABatchAndEachGetsItsOwnFinalStates) {
  DynamicBatcherOptions o = Options();
  o.max_batch_size = 8;
  Start(o);
  clock_.AwaitSleeps(1);
  std::map<std::string, std::vector<engine::Tensor>> sa, sb, sc;
  const RequestSpec a{.id = 100, .rows = 2, .initial_h = {1, 2}, .final_states = &sa};
  const RequestSpec b{.id = 200, .steps = 3, .initial_h = {5}, .final_states = &sb};
  const RequestSpec c{.id = 300, .final_states = &sc};  // no initial states: its own batch
  auto answer_a = Schedule(a);
  auto answer_b = Schedule(b);
  auto answer_c = Schedule(c);
  clock_.AwaitSleeps(2);
  clock_.AdvanceMicros(10);
  answer_a->done.WaitForNotification();
  answer_b->done.WaitForNotification();
  answer_c->done.WaitForNotification();
  EXPECT_TRUE(IsOwnAnswer(*answer_a, a));
  EXPECT_TRUE(IsOwnAnswer(*answer_b, b));
  EXPECT_TRUE(IsOwnAnswer(*answer_c, c));
  EXPECT_EQ(FinalHs(sa), (std::vector<float>{FinalH(a, 0), FinalH(a, 1)}));
  EXPECT_EQ(FinalHs(sb), (std::vector<float>{FinalH(b, 0)}));
  EXPECT_EQ(FinalHs(sc), (std::vector<float>{FinalH(c, 0)}));
  const auto seen = engine().seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].first_steps, (std::vector<float>{100, 101, 200}));
  EXPECT_EQ(seen[1].first_steps, (std::vector<float>{300}));
}

TEST_F(DynamicBatcherTest, FinalStatesOfASplitRequestAreReassembledInOrder) {
  Start(Options());
  std::map<std::string, std::vector<engine::Tensor>> states;
  const RequestSpec spec{
      .id = 100, .rows = 6, .initial_h = {1, 2, 3, 4, 5, 6}, .final_states = &states};
  auto a = Schedule(spec);
  engine().AwaitCalls(1);
  batcher_->Drain();
  EXPECT_TRUE(IsOwnAnswer(*a, spec));
  std::vector<float> want;
  for (int64_t r = 0; r < 6; ++r) want.push_back(FinalH(spec, r));
  EXPECT_EQ(FinalHs(states), want);
  EXPECT_EQ(engine().calls(), 2);
}

TEST_F(DynamicBatcherTest, EqualLengthsWithoutGivenLengthsPassNoLengths) {
  DynamicBatcherOptions o = Options();
  o.max_batch_size = 2;
  Start(o);
  auto a = Schedule({.id = 100});
  auto b = Schedule({.id = 200});
  a->done.WaitForNotification();
  b->done.WaitForNotification();
  ASSERT_EQ(engine().calls(), 1);
  EXPECT_TRUE(engine().seen()[0].lengths.empty());
}

TEST_F(DynamicBatcherTest, LengthBucketsRunLongAndShortSequencesApart) {
  DynamicBatcherOptions o = Options();
  o.max_batch_size = 8;
  Start(o);
  std::vector<BatchStats> stats;
  absl::Mutex mu;
  batcher_->SetObserver([&](const BatchStats& s) {
    absl::MutexLock lock(&mu);
    stats.push_back(s);
  });
  const std::vector<RequestSpec> specs = {
      {.id = 100, .steps = 50}, {.id = 200, .steps = 10}, {.id = 300, .steps = 48},
      {.id = 400, .steps = 10}, {.id = 500, .steps = 11},
  };
  std::vector<std::shared_ptr<Answer>> answers;
  for (const auto& s : specs) answers.push_back(Schedule(s));
  batcher_->Drain();
  for (size_t i = 0; i < specs.size(); ++i) EXPECT_TRUE(IsOwnAnswer(*answers[i], specs[i]));
  absl::MutexLock lock(&mu);
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[0].real_steps, 98);
  EXPECT_EQ(stats[0].computed_steps, 100);
  EXPECT_EQ(stats[1].real_steps, 31);
  EXPECT_EQ(stats[1].computed_steps, 33);
  const auto c = batcher_->counters();
  EXPECT_EQ(c.real_steps, 129);
  EXPECT_EQ(c.computed_steps, 133);
  EXPECT_EQ(c.sequences, 5);
  EXPECT_EQ(c.batches, 2);
  EXPECT_EQ(c.requests_completed, 5);
}

TEST_F(DynamicBatcherTest, BadRequestFailsAloneAndTheOthersGetTheirRows) {
  DynamicBatcherOptions o = Options();
  o.max_batch_size = 3;
  Start(o);
  engine().FailOnNegative();
  auto good1 = Schedule({.id = 100});
  auto bad = Schedule({.id = -500});
  auto good2 = Schedule({.id = 300});
  good1->done.WaitForNotification();
  bad->done.WaitForNotification();
  good2->done.WaitForNotification();
  EXPECT_TRUE(IsOwnAnswer(*good1, {.id = 100}));
  EXPECT_TRUE(IsOwnAnswer(*good2, {.id = 300}));
  EXPECT_EQ(bad->result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine().calls(), 4);  // the batch, then each request alone
  batcher_->Drain();               // counters are final once nothing runs
  EXPECT_EQ(batcher_->counters().requests_failed, 1);
  EXPECT_EQ(batcher_->counters().requests_completed, 2);
}

TEST_F(DynamicBatcherTest, EngineAnsweringTheWrongRowCountFailsTheRequestsWithInternal) {
  DynamicBatcherOptions o = Options();
  o.max_batch_size = 1;
  Start(o);
  engine().DropARow();
  auto a = Schedule({.id = 100});
  a->done.WaitForNotification();
  EXPECT_EQ(a->calls, 1);
  EXPECT_EQ(a->result.status().code(), absl::StatusCode::kInternal) << a->result.status();
  EXPECT_NE(a->result.status().message().find("for a batch of 1"), std::string::npos)
      << a->result.status();
}

// The probe a servable gives the batcher: a one-row batch on the faulted instance.
absl::Status ProbeFake(FakeEngine& engine) {
  std::shared_ptr<Answer> unused;
  auto r = MakeRequest({.id = 1}, &unused);
  std::vector<engine::Tensor> out;
  return engine.Run(r->batch, &out);
}

TEST_F(DynamicBatcherTest, EngineFaultWithAPassingProbeKeepsTheInstanceServing) {
  DynamicBatcherOptions o = Options();
  o.max_batch_size = 1;
  Start(o);
  int probes = 0;
  batcher_->SetInstanceProbe([&](int i, const absl::Status&) {
    ++probes;
    return ProbeFake(engine(i));
  });
  engine().FailInternal(1);  // one transient fault
  auto a = Schedule({.id = 100});
  a->done.WaitForNotification();
  EXPECT_EQ(a->result.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(a->result.status().message().find("device fault"), std::string::npos);
  auto b = Schedule({.id = 200});
  b->done.WaitForNotification();
  EXPECT_TRUE(IsOwnAnswer(*b, {.id = 200}));
  EXPECT_EQ(probes, 1);
}

TEST_F(DynamicBatcherTest, LastInstanceFailingItsProbeLeavesAndRequestsAreUnavailable) {
  DynamicBatcherOptions o = Options();
  o.max_batch_size = 1;
  Start(o);
  batcher_->SetInstanceProbe([&](int i, const absl::Status&) { return ProbeFake(engine(i)); });
  engine().FailInternal(-1);  // a broken device: every call fails
  auto a = Schedule({.id = 100});
  a->done.WaitForNotification();
  EXPECT_EQ(a->result.status().code(), absl::StatusCode::kInternal);
  // The worker retires after its probe; then nothing is taken.
  std::shared_ptr<Answer> answer;
  for (int tries = 0; tries < 100000; ++tries) {
    auto r = MakeRequest({.id = 200}, &answer);
    const absl::Status s = batcher_->Schedule(&r);
    if (s.ok()) {
      answer->done.WaitForNotification();
      if (absl::IsUnavailable(answer->result.status())) break;  // queued as it retired
      continue;
    }
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_NE(s.message().find("every instance failed"), std::string::npos) << s;
    EXPECT_NE(s.message().find("device fault"), std::string::npos) << s;
    break;
  }
  const int calls = engine().calls();
  std::shared_ptr<Answer> late;
  auto r = MakeRequest({.id = 300}, &late);
  EXPECT_EQ(batcher_->Schedule(&r).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(engine().calls(), calls);
}

TEST_F(DynamicBatcherTest, FaultedInstanceLeavesAndTheOtherServesEveryLaterRequest) {
  DynamicBatcherOptions o = Options();
  o.max_batch_size = 1;
  Start(o, /*instances=*/2);
  batcher_->SetInstanceProbe([&](int i, const absl::Status&) { return ProbeFake(engine(i)); });
  engine(0).FailInternal(-1);
  int failed = 0;
  for (int i = 1; i <= 20; ++i) {
    const RequestSpec spec{.id = 100.0f * i};
    auto a = Schedule(spec);
    a->done.WaitForNotification();
    if (a->result.ok()) {
      EXPECT_TRUE(IsOwnAnswer(*a, spec));
    } else {
      EXPECT_EQ(a->result.status().code(), absl::StatusCode::kInternal);
      ++failed;
    }
  }
  EXPECT_LE(failed, 1);             // at most the one batch instance 0 ran before it left
  EXPECT_LE(engine(0).calls(), 2);  // that batch and its probe
  EXPECT_GE(engine(1).calls(), 19);
}

TEST_F(DynamicBatcherTest, EachInstanceRunsItsOwnBatchConcurrently) {
  DynamicBatcherOptions o = Options();
  o.max_batch_size = 1;
  Start(o, /*instances=*/2);
  engine(0).Gate();
  engine(1).Gate();
  auto a = Schedule({.id = 100});
  auto b = Schedule({.id = 200});
  engine(0).AwaitCalls(1);
  engine(1).AwaitCalls(1);  // both run at once, one batch each
  engine(0).Open();
  engine(1).Open();
  a->done.WaitForNotification();
  b->done.WaitForNotification();
  EXPECT_TRUE(IsOwnAnswer(*a, {.id = 100}));
  EXPECT_TRUE(IsOwnAnswer(*b, {.id = 200}));
}

TEST_F(DynamicBatcherTest, DrainRunsQueuedRequestsWithoutWaitingForTheDelay) {
  DynamicBatcherOptions o = Options();
  o.max_queue_delay_us = 1'000'000;
  Start(o);
  auto a = Schedule({.id = 100});
  auto b = Schedule({.id = 200, .steps = 3});
  batcher_->Drain();
  EXPECT_TRUE(IsOwnAnswer(*a, {.id = 100}));
  EXPECT_TRUE(IsOwnAnswer(*b, {.id = 200, .steps = 3}));
  std::shared_ptr<Answer> late;
  auto r = MakeRequest({.id = 300}, &late);
  const absl::Status s = batcher_->Schedule(&r);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(r, nullptr);
}

TEST_F(DynamicBatcherTest, DestructionFailsQueuedRequestsWithUnavailableAndFinishesRunningOnes) {
  DynamicBatcherOptions o = Options();
  o.max_batch_size = 1;
  Start(o);
  engine().Gate();
  auto running = Schedule({.id = 100});
  engine().AwaitCalls(1);
  auto queued1 = Schedule({.id = 200});
  auto queued2 = Schedule({.id = 300});
  std::thread destroy([&] { batcher_.reset(); });
  queued1->done.WaitForNotification();
  queued2->done.WaitForNotification();
  EXPECT_EQ(queued1->result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(queued2->result.status().code(), absl::StatusCode::kUnavailable);
  engine().Open();
  destroy.join();
  EXPECT_TRUE(IsOwnAnswer(*running, {.id = 100}));
  EXPECT_EQ(engine().calls(), 1);
}

TEST_F(DynamicBatcherTest, ObserverSeesQueueWaitOfEachRequest) {
  Start(Options());
  std::vector<BatchStats> stats;
  absl::Mutex mu;
  batcher_->SetObserver([&](const BatchStats& s) {
    absl::MutexLock lock(&mu);
    stats.push_back(s);
  });
  clock_.AwaitSleeps(1);
  auto a = Schedule({.id = 100});
  clock_.AwaitSleeps(2);
  clock_.AdvanceMicros(10);
  a->done.WaitForNotification();
  batcher_->Drain();
  absl::MutexLock lock(&mu);
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].queue_durations, (std::vector<absl::Duration>{absl::Microseconds(10)}));
  EXPECT_EQ(stats[0].sequences, 1);
  EXPECT_TRUE(stats[0].status.ok());
}

// The work-conserving rule (the default): a free instance runs what is queued without the clock
// moving; requests queue, and share a batch, only while every instance is busy.
TEST_F(DynamicBatcherTest, WorkConservingIdleInstanceRunsALoneRequestWithoutTheClockMoving) {
  Start(WorkConserving());
  const RequestSpec spec{.id = 100};
  auto a = Schedule(spec);
  a->done.WaitForNotification();  // the clock never moves: no delay is waited for
  EXPECT_TRUE(IsOwnAnswer(*a, spec));
  EXPECT_EQ(engine().calls(), 1);
  EXPECT_EQ(engine().seen()[0].first_steps, (std::vector<float>{100}));
}

TEST_F(DynamicBatcherTest, WorkConservingQueuesWhileTheInstanceIsBusyThenRunsAllInOneBatch) {
  Start(WorkConserving());
  engine().Gate();
  auto first = Schedule({.id = 100});
  engine().AwaitCalls(1);  // the instance is busy with the first request
  std::vector<std::shared_ptr<Answer>> queued;
  for (int i = 2; i <= 4; ++i) queued.push_back(Schedule({.id = 100.0f * i}));
  EXPECT_EQ(batcher_->counters().queued_requests, 3);
  engine().Open();
  for (size_t i = 0; i < queued.size(); ++i) {
    queued[i]->done.WaitForNotification();
    EXPECT_TRUE(IsOwnAnswer(*queued[i], {.id = 100.0f * (i + 2)}));
  }
  first->done.WaitForNotification();
  ASSERT_EQ(engine().calls(), 2);
  // Past the preferred size 2: what queued while the instance was busy is one batch.
  EXPECT_EQ(engine().seen()[1].first_steps, (std::vector<float>{200, 300, 400}));
}

TEST_F(DynamicBatcherTest, WorkConservingSecondInstanceTakesARequestWhileTheFirstIsBusy) {
  Start(WorkConserving(), /*instances=*/2);
  engine(0).Gate();
  engine(1).Gate();
  auto a = Schedule({.id = 100});
  // One instance (either) takes it at once and is held busy.
  while (engine(0).calls() + engine(1).calls() == 0) absl::SleepFor(absl::Milliseconds(1));
  const int busy = engine(0).calls() == 1 ? 0 : 1;
  auto b = Schedule({.id = 200});
  // The other runs the second request at once: it neither waits for the delay nor for the
  // busy instance.
  engine(1 - busy).AwaitCalls(1);
  EXPECT_EQ(engine(busy).seen()[0].first_steps, (std::vector<float>{100}));
  EXPECT_EQ(engine(1 - busy).seen()[0].first_steps, (std::vector<float>{200}));
  engine(0).Open();
  engine(1).Open();
  a->done.WaitForNotification();
  b->done.WaitForNotification();
  EXPECT_TRUE(IsOwnAnswer(*a, {.id = 100}));
  EXPECT_TRUE(IsOwnAnswer(*b, {.id = 200}));
}

TEST_F(DynamicBatcherTest, WorkConservingHigherPriorityQueuedBehindABusyInstanceRunsFirst) {
  DynamicBatcherOptions o = WorkConserving();
  o.max_batch_size = 1;
  o.preferred_batch_sizes = {};
  o.priority_levels = 2;
  o.default_priority_level = 2;
  Start(o);
  engine().Gate();
  auto running = Schedule({.id = 100});
  engine().AwaitCalls(1);
  auto low = Schedule({.id = 200, .priority = 2});
  auto high = Schedule({.id = 300, .priority = 1});
  engine().Open();
  low->done.WaitForNotification();
  high->done.WaitForNotification();
  running->done.WaitForNotification();
  ASSERT_EQ(engine().calls(), 3);
  EXPECT_EQ(engine().seen()[1].first_steps, (std::vector<float>{300}));
  EXPECT_EQ(engine().seen()[2].first_steps, (std::vector<float>{200}));
}

// With run_on_caller_when_idle (what servables use), a caller that finds an instance free runs
// the batch on its own thread: the answer is there when Schedule returns.
TEST_F(DynamicBatcherTest, CallerRunsTheBatchItselfWhenAnInstanceIsFree) {
  DynamicBatcherOptions o = WorkConserving();
  o.run_on_caller_when_idle = true;
  Start(o);
  const RequestSpec spec{.id = 100};
  auto a = Schedule(spec);
  EXPECT_TRUE(a->done.HasBeenNotified());  // no hand-off: it ran inside Schedule
  EXPECT_TRUE(IsOwnAnswer(*a, spec));
  EXPECT_EQ(engine().calls(), 1);
}

// A caller that must not block (a gRPC callback handler: BatchRequest::may_run_on_caller
// false) hands its batch to the worker even when the instance is free.
TEST_F(DynamicBatcherTest, CallerThatMayNotRunTheBatchHandsItToTheWorker) {
  DynamicBatcherOptions o = WorkConserving();
  o.run_on_caller_when_idle = true;
  Start(o);
  engine().Gate();
  const RequestSpec spec{.id = 100};
  std::shared_ptr<Answer> a;
  auto r = MakeRequest(spec, &a);
  r->may_run_on_caller = false;
  ASSERT_TRUE(batcher_->Schedule(&r).ok());  // returns at once: the worker runs it
  engine().AwaitCalls(1);
  EXPECT_FALSE(a->done.HasBeenNotified());
  engine().Open();
  a->done.WaitForNotification();
  EXPECT_TRUE(IsOwnAnswer(*a, spec));
}

TEST_F(DynamicBatcherTest, CallerQueuesWhenEveryInstanceIsBusyAndTheWorkerRunsItAfter) {
  DynamicBatcherOptions o = WorkConserving();
  o.run_on_caller_when_idle = true;
  Start(o);
  engine().Gate();
  std::shared_ptr<Answer> first;
  std::thread caller([&] { first = Schedule({.id = 100}); });  // runs, and blocks, inside
  engine().AwaitCalls(1);
  auto second = Schedule({.id = 200});
  auto third = Schedule({.id = 300});
  EXPECT_FALSE(second->done.HasBeenNotified());  // queued: the only instance is busy
  engine().Open();
  caller.join();
  second->done.WaitForNotification();
  third->done.WaitForNotification();
  EXPECT_TRUE(IsOwnAnswer(*first, {.id = 100}));
  EXPECT_TRUE(IsOwnAnswer(*second, {.id = 200}));
  EXPECT_TRUE(IsOwnAnswer(*third, {.id = 300}));
  ASSERT_EQ(engine().calls(), 2);
  EXPECT_EQ(engine().seen()[1].first_steps, (std::vector<float>{200, 300}));
}

TEST_F(DynamicBatcherTest, CallerThatFaultsTheLastInstanceRetiresItAndLaterRequestsAreUnavailable) {
  DynamicBatcherOptions o = WorkConserving();
  o.run_on_caller_when_idle = true;
  Start(o);
  batcher_->SetInstanceProbe(
      [](int, const absl::Status&) { return absl::UnavailableError("device lost"); });
  engine().FailInternal(-1);
  auto a = Schedule({.id = 100});
  ASSERT_TRUE(a->done.HasBeenNotified());
  EXPECT_EQ(a->result.status().code(), absl::StatusCode::kInternal);
  std::shared_ptr<Answer> late;
  auto r = MakeRequest({.id = 200}, &late);
  EXPECT_EQ(batcher_->Schedule(&r).code(), absl::StatusCode::kUnavailable);
}

// A cancel flag the test flips, as a client's cancel flips ServerContext::IsCancelled.
std::function<bool()> CancelFlag(std::shared_ptr<std::atomic<bool>>* flag) {
  *flag = std::make_shared<std::atomic<bool>>(false);
  return [f = *flag] { return f->load(); };
}

// Generous: an answer that comes at all comes within milliseconds (kAbandonPollInterval).
constexpr absl::Duration kAnswerBound = absl::Seconds(20);

TEST_F(DynamicBatcherTest, ACancelledQueuedRequestLeavesTheQueueAtOnceAndTheNextRuns) {
  Start(WorkConserving());
  engine().Gate();
  auto first = Schedule({.id = 100});
  engine().AwaitCalls(1);  // the only instance is busy
  std::shared_ptr<Answer> cancelled;
  std::shared_ptr<std::atomic<bool>> flag;
  auto r = MakeRequest({.id = 200}, &cancelled);
  r->cancelled = CancelFlag(&flag);
  ASSERT_TRUE(batcher_->Schedule(&r).ok());
  auto next = Schedule({.id = 300});
  EXPECT_EQ(batcher_->counters().queued_requests, 2);
  flag->store(true);
  // Answered while the instance is still busy, and out of the queue.
  ASSERT_TRUE(cancelled->done.WaitForNotificationWithTimeout(kAnswerBound));
  EXPECT_TRUE(absl::IsCancelled(cancelled->result.status())) << cancelled->result.status();
  EXPECT_EQ(batcher_->counters().queued_requests, 1);
  EXPECT_EQ(batcher_->counters().requests_cancelled, 1);
  EXPECT_FALSE(first->done.HasBeenNotified());
  engine().Open();
  next->done.WaitForNotification();
  first->done.WaitForNotification();
  EXPECT_TRUE(IsOwnAnswer(*next, {.id = 300}));
  ASSERT_EQ(engine().calls(), 2);
  EXPECT_EQ(engine().seen()[1].first_steps, (std::vector<float>{300}));  // not 200's rows
  EXPECT_EQ(cancelled->calls, 1);
}

TEST_F(DynamicBatcherTest, ABatchWhoseEveryRequestWasCancelledStopsAndTheInstanceServesTheNext) {
  Start(WorkConserving());
  engine().Gate();
  std::shared_ptr<Answer> running;
  std::shared_ptr<std::atomic<bool>> flag;
  auto r = MakeRequest({.id = 100}, &running);
  r->cancelled = CancelFlag(&flag);
  r->may_run_on_caller = false;
  ASSERT_TRUE(batcher_->Schedule(&r).ok());
  engine().AwaitCalls(1);
  flag->store(true);
  // The gate stays shut: only the engine's stop ends the run.
  ASSERT_TRUE(running->done.WaitForNotificationWithTimeout(kAnswerBound));
  EXPECT_TRUE(absl::IsCancelled(running->result.status())) << running->result.status();
  engine().AwaitStopped(1);  // the engine call ended on its stop, the gate still shut
  engine().Open();
  auto next = Schedule({.id = 200});
  next->done.WaitForNotification();
  EXPECT_TRUE(IsOwnAnswer(*next, {.id = 200}));
  EXPECT_EQ(engine().stopped(), 1);
  EXPECT_EQ(running->calls, 1);
  EXPECT_EQ(batcher_->counters().requests_cancelled, 1);
}

TEST_F(DynamicBatcherTest,
       ACancelledRequestsRowsAreDroppedFromItsRunningBatchAndTheOthersGetTheirs) {
  Start(Options());
  engine().Gate();
  clock_.AwaitSleeps(1);  // the worker sleeps on the empty queue
  std::shared_ptr<Answer> cancelled;
  std::shared_ptr<std::atomic<bool>> flag;
  auto r = MakeRequest({.id = 100, .rows = 2}, &cancelled);
  r->cancelled = CancelFlag(&flag);
  ASSERT_TRUE(batcher_->Schedule(&r).ok());
  const RequestSpec wanted_spec{.id = 200};
  auto wanted = Schedule(wanted_spec);
  clock_.AwaitSleeps(2);
  clock_.AdvanceMicros(10);  // the delay is over: one batch of both requests' rows
  engine().AwaitCalls(1);
  EXPECT_EQ(engine().seen()[0].first_steps.size(), 3u);
  flag->store(true);
  // Answered while its batch still runs; the batch goes on for the request still wanted.
  ASSERT_TRUE(cancelled->done.WaitForNotificationWithTimeout(kAnswerBound));
  EXPECT_TRUE(absl::IsCancelled(cancelled->result.status())) << cancelled->result.status();
  EXPECT_FALSE(wanted->done.HasBeenNotified());
  engine().Open();
  wanted->done.WaitForNotification();
  EXPECT_TRUE(IsOwnAnswer(*wanted, wanted_spec));
  EXPECT_EQ(engine().stopped(), 0);
  EXPECT_EQ(engine().calls(), 1);
  EXPECT_EQ(cancelled->calls, 1);  // its rows were not delivered after the answer
}

TEST(DynamicBatcherCreateTest, BadOptionsAreInvalidArgumentNamingTheField) {
  FakeEngine engine;
  DynamicBatcherOptions o = Options();
  o.max_batch_size = 0;
  auto b = DynamicBatcher::Create(o, {&engine});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("max_batch_size must be positive"), std::string::npos)
      << b.status();
  o = Options();
  o.preferred_batch_sizes = {5};
  b = DynamicBatcher::Create(o, {&engine});
  EXPECT_NE(b.status().message().find("preferred_batch_size must be in [1, 4]"), std::string::npos)
      << b.status();
  o = Options();
  o.priority_levels = 2;
  b = DynamicBatcher::Create(o, {&engine});
  EXPECT_NE(b.status().message().find("default_priority_level must be in [1, 2]"),
            std::string::npos)
      << b.status();
  o = Options();
  o.max_computed_steps_ratio = 0.5;
  b = DynamicBatcher::Create(o, {&engine});
  EXPECT_NE(b.status().message().find("max_computed_steps_ratio must be 0 (no bound) or >= 1"),
            std::string::npos)
      << b.status();
  o = Options();
  b = DynamicBatcher::Create(o, {});
  EXPECT_NE(b.status().message().find("at least one instance"), std::string::npos) << b.status();
}

}  // namespace
}  // namespace rnnserve::testing
