// The direct scheduler with the fake engine: a request runs alone, split into engine calls of
// at most max_batch_size rows and joined back; where it runs; deadlines; draining; ownership.

#include "server/batching/direct_scheduler.h"

#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/unit/batching_fake_engine.h"
#include "tests/unit/batching_test_util.h"

namespace rnnserve {
namespace {

using server::batching::BatchRequest;
using server::batching::BatchStats;
using server::batching::DirectScheduler;
using server::batching::SchedulerKind;
using testing::Answer;
using testing::FakeEngine;
using testing::IsOwnAnswer;
using testing::MakeRequest;
using testing::RequestSpec;

std::unique_ptr<DirectScheduler> Make(FakeEngine* engine, int max_batch_size) {
  auto s = DirectScheduler::Create({.model_name = "fake", .max_batch_size = max_batch_size},
                                   {engine}, nullptr);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

TEST(DirectSchedulerTest, RefusesBadOptions) {
  FakeEngine engine;
  EXPECT_TRUE(absl::IsInvalidArgument(
      DirectScheduler::Create({.model_name = "m", .max_batch_size = -1}, {&engine}, nullptr)
          .status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(DirectScheduler::Create({.model_name = "m"}, {}, nullptr).status()));
}

TEST(DirectSchedulerTest, RunsOnTheCallersThreadWhenAnInstanceIsIdle) {
  FakeEngine engine;
  auto s = Make(&engine, 0);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->kind(), SchedulerKind::kDirect);
  const RequestSpec spec{.id = 1, .rows = 3, .steps = 4, .lengths = {4, 2, 0}};
  std::shared_ptr<Answer> answer;
  auto request = MakeRequest(spec, &answer);
  ASSERT_TRUE(s->Schedule(&request).ok());
  EXPECT_EQ(request, nullptr);  // taken
  // Answered before Schedule returned: it ran here.
  ASSERT_TRUE(answer->done.HasBeenNotified());
  EXPECT_TRUE(IsOwnAnswer(*answer, spec));
  EXPECT_EQ(engine.calls(), 1);
}

TEST(DirectSchedulerTest, AnotherCallersRequestRunsBetweenTheCallsOfALargeRequest) {
  FakeEngine engine;
  engine.Gate();
  auto s = Make(&engine, 1);
  ASSERT_NE(s, nullptr);
  const RequestSpec big{.id = 100, .rows = 4, .steps = 2};
  const RequestSpec small{.id = 200, .rows = 1, .steps = 2};
  std::shared_ptr<Answer> big_answer, small_answer;
  auto big_request = MakeRequest(big, &big_answer);
  big_request->caller = "token:big";
  big_request->caller_blocks = true;
  auto small_request = MakeRequest(small, &small_answer);
  small_request->caller = "token:small";
  small_request->caller_blocks = true;
  std::thread big_thread([&] { ASSERT_TRUE(s->Schedule(&big_request).ok()); });
  engine.AwaitCalls(1);  // the big request's first call holds the instance
  std::thread small_thread([&] { ASSERT_TRUE(s->Schedule(&small_request).ok()); });
  while (s->waiting_for_instance() < 1) std::this_thread::yield();
  engine.Open();
  big_thread.join();
  small_thread.join();
  EXPECT_TRUE(IsOwnAnswer(*big_answer, big));
  EXPECT_TRUE(IsOwnAnswer(*small_answer, small));
  std::vector<float> order;
  for (const auto& seen : engine.seen()) order.push_back(seen.first_steps.at(0));
  // One call of the big request, then the small one's turn, then the rest of the big one.
  EXPECT_EQ(order, (std::vector<float>{100, 200, 101, 102, 103}));
}

TEST(DirectSchedulerTest, SplitsALargeRequestIntoCallsOfMaxBatchSizeAndJoinsThem) {
  FakeEngine engine;
  auto s = Make(&engine, 2);
  ASSERT_NE(s, nullptr);
  std::vector<BatchStats> stats;
  s->SetObserver([&stats](const BatchStats& st) { stats.push_back(st); });
  std::map<std::string, std::vector<engine::Tensor>> final_states;
  const RequestSpec spec{.id = 2,
                         .rows = 5,
                         .steps = 3,
                         .lengths = {3, 1, 2, 3, 0},
                         .initial_h = {1, 2, 3, 4, 5},
                         .final_states = &final_states};
  std::shared_ptr<Answer> answer;
  auto request = MakeRequest(spec, &answer);
  ASSERT_TRUE(s->Schedule(&request).ok());
  answer->done.WaitForNotification();
  EXPECT_TRUE(IsOwnAnswer(*answer, spec));
  ASSERT_EQ(engine.seen().size(), 3u);
  EXPECT_EQ(engine.seen()[0].input_shape[0], 2);
  EXPECT_EQ(engine.seen()[2].input_shape[0], 1);
  ASSERT_EQ(final_states["rnn"].size(), 1u);
  for (int64_t b = 0; b < spec.rows; ++b) {
    EXPECT_FLOAT_EQ(final_states["rnn"][0].f32()[b], testing::FinalH(spec, b)) << "row " << b;
  }
  // One report per engine call; the request's wait only with its first.
  ASSERT_EQ(stats.size(), 3u);
  EXPECT_EQ(stats[0].queue_durations.size(), 1u);
  EXPECT_TRUE(stats[1].queue_durations.empty());
  EXPECT_EQ(stats[0].real_steps, 3 + 1);
}

TEST(DirectSchedulerTest, ARequestThatMayNotBlockRunsOnASchedulerThread) {
  FakeEngine engine;
  auto s = Make(&engine, 0);
  ASSERT_NE(s, nullptr);
  const RequestSpec spec{.id = 3, .rows = 1};
  std::shared_ptr<Answer> answer;
  auto request = MakeRequest(spec, &answer);
  request->may_run_on_caller = false;
  bool on_worker = false;
  auto done = std::move(request->done);
  request->done = [&, done = std::move(done)](auto result) mutable {
    on_worker = s->IsWorkerThread();
    done(std::move(result));
  };
  ASSERT_TRUE(s->Schedule(&request).ok());
  answer->done.WaitForNotification();
  EXPECT_TRUE(on_worker);
  EXPECT_TRUE(IsOwnAnswer(*answer, spec));
}

TEST(DirectSchedulerTest, APastDeadlineIsRefusedAndTheRequestStaysWithTheCaller) {
  FakeEngine engine;
  auto s = Make(&engine, 0);
  ASSERT_NE(s, nullptr);
  std::shared_ptr<Answer> answer;
  auto request = MakeRequest({.id = 4, .deadline = absl::Now() - absl::Seconds(1)}, &answer);
  EXPECT_TRUE(absl::IsDeadlineExceeded(s->Schedule(&request)));
  EXPECT_NE(request, nullptr);
  EXPECT_FALSE(answer->done.HasBeenNotified());
  EXPECT_EQ(engine.calls(), 0);
}

TEST(DirectSchedulerTest, AWaitingRequestExpiresWhileTheInstanceIsBusy) {
  FakeEngine engine;
  engine.Gate();
  auto s = Make(&engine, 0);
  ASSERT_NE(s, nullptr);
  std::shared_ptr<Answer> first, second;
  auto a = MakeRequest({.id = 5}, &first);
  a->may_run_on_caller = false;
  ASSERT_TRUE(s->Schedule(&a).ok());
  engine.AwaitCalls(1);
  // A synchronous caller waits for the busy instance on its own thread, until its deadline.
  auto b = MakeRequest({.id = 6, .deadline = absl::Now() + absl::Milliseconds(20)}, &second);
  b->caller_blocks = true;
  std::thread caller([&] { EXPECT_TRUE(s->Schedule(&b).ok()); });
  second->done.WaitForNotification();
  caller.join();
  EXPECT_TRUE(absl::IsDeadlineExceeded(second->result.status())) << second->result.status();
  engine.Open();
  first->done.WaitForNotification();
  EXPECT_TRUE(first->result.ok());
  EXPECT_EQ(engine.calls(), 1);
}

TEST(DirectSchedulerTest, DrainWaitsForRunningRequestsAndThenRefuses) {
  FakeEngine engine;
  engine.Gate();
  auto s = Make(&engine, 0);
  ASSERT_NE(s, nullptr);
  std::shared_ptr<Answer> answer;
  auto request = MakeRequest({.id = 7}, &answer);
  request->may_run_on_caller = false;
  ASSERT_TRUE(s->Schedule(&request).ok());
  engine.AwaitCalls(1);
  std::thread drain([&] { s->Drain(); });
  engine.Open();
  drain.join();
  EXPECT_TRUE(answer->done.HasBeenNotified());
  std::shared_ptr<Answer> late;
  auto again = MakeRequest({.id = 8}, &late);
  EXPECT_TRUE(absl::IsUnavailable(s->Schedule(&again)));
  EXPECT_NE(again, nullptr);
}

// A cancel flag the test flips, as a client's cancel flips ServerContext::IsCancelled.
std::function<bool()> CancelFlag(std::shared_ptr<std::atomic<bool>>* flag) {
  *flag = std::make_shared<std::atomic<bool>>(false);
  return [f = *flag] { return f->load(); };
}

// Generous: an answer that comes at all comes within milliseconds (kAbandonPollInterval).
constexpr absl::Duration kAnswerBound = absl::Seconds(20);

TEST(DirectSchedulerTest, ACancelledWaitingRequestLeavesAtOnceAndNeverRunsAndTheNextRuns) {
  FakeEngine engine;
  engine.Gate();
  auto s = Make(&engine, 0);
  ASSERT_NE(s, nullptr);
  std::shared_ptr<Answer> running, cancelled, next;
  auto a = MakeRequest({.id = 11}, &running);
  a->may_run_on_caller = false;
  ASSERT_TRUE(s->Schedule(&a).ok());
  engine.AwaitCalls(1);  // the only instance is busy
  std::shared_ptr<std::atomic<bool>> flag;
  auto b = MakeRequest({.id = 12}, &cancelled);
  b->may_run_on_caller = false;
  b->cancelled = CancelFlag(&flag);
  ASSERT_TRUE(s->Schedule(&b).ok());
  auto c = MakeRequest({.id = 13}, &next);
  c->may_run_on_caller = false;
  ASSERT_TRUE(s->Schedule(&c).ok());
  flag->store(true);
  // Answered while the instance is still busy: it left the queue.
  ASSERT_TRUE(cancelled->done.WaitForNotificationWithTimeout(kAnswerBound));
  EXPECT_TRUE(absl::IsCancelled(cancelled->result.status())) << cancelled->result.status();
  EXPECT_FALSE(running->done.HasBeenNotified());
  engine.Open();
  running->done.WaitForNotification();
  next->done.WaitForNotification();
  EXPECT_TRUE(IsOwnAnswer(*running, {.id = 11}));
  EXPECT_TRUE(IsOwnAnswer(*next, {.id = 13}));
  ASSERT_EQ(engine.calls(), 2);  // the cancelled request never reached the engine
  EXPECT_EQ(engine.seen()[1].first_steps, (std::vector<float>{13}));
  EXPECT_EQ(cancelled->calls, 1);
}

TEST(DirectSchedulerTest, ACallerWaitingForABusyInstanceStopsWaitingWhenItsClientCancels) {
  FakeEngine engine;
  engine.Gate();
  auto s = Make(&engine, 0);
  ASSERT_NE(s, nullptr);
  std::shared_ptr<Answer> running, waiting;
  auto a = MakeRequest({.id = 31}, &running);
  a->may_run_on_caller = false;
  ASSERT_TRUE(s->Schedule(&a).ok());
  engine.AwaitCalls(1);
  // A synchronous caller waits for the busy instance on its own thread (InstancePool::Acquire).
  std::shared_ptr<std::atomic<bool>> flag;
  auto b = MakeRequest({.id = 32}, &waiting);
  b->caller_blocks = true;
  b->cancelled = CancelFlag(&flag);
  std::thread caller([&] { EXPECT_TRUE(s->Schedule(&b).ok()); });
  flag->store(true);
  ASSERT_TRUE(waiting->done.WaitForNotificationWithTimeout(kAnswerBound));
  caller.join();
  EXPECT_TRUE(absl::IsCancelled(waiting->result.status())) << waiting->result.status();
  EXPECT_FALSE(running->done.HasBeenNotified());
  engine.Open();
  running->done.WaitForNotification();
  EXPECT_TRUE(IsOwnAnswer(*running, {.id = 31}));
  EXPECT_EQ(engine.calls(), 1);
}

TEST(DirectSchedulerTest,
     ARunningRequestStopsAtTheNextStepOnceItsClientCancelsOrItsDeadlinePasses) {
  for (const bool by_deadline : {false, true}) {
    SCOPED_TRACE(by_deadline ? "deadline" : "cancel");
    FakeEngine engine;
    engine.Gate();
    auto s = Make(&engine, 0);
    ASSERT_NE(s, nullptr);
    std::shared_ptr<Answer> running;
    std::shared_ptr<std::atomic<bool>> flag;
    auto a = MakeRequest(
        {.id = 21,
         .deadline = by_deadline ? absl::Now() + absl::Milliseconds(50) : absl::InfiniteFuture()},
        &running);
    a->may_run_on_caller = false;
    a->cancelled = CancelFlag(&flag);
    ASSERT_TRUE(s->Schedule(&a).ok());
    engine.AwaitCalls(1);
    if (!by_deadline) flag->store(true);
    // The gate stays shut: only the engine's stop ends the run.
    ASSERT_TRUE(running->done.WaitForNotificationWithTimeout(kAnswerBound));
    EXPECT_EQ(running->result.status().code(),
              by_deadline ? absl::StatusCode::kDeadlineExceeded : absl::StatusCode::kCancelled)
        << running->result.status();
    EXPECT_EQ(engine.stopped(), 1);
    // The instance is free again for the next request.
    engine.Open();
    std::shared_ptr<Answer> next;
    auto b = MakeRequest({.id = 22}, &next);
    ASSERT_TRUE(s->Schedule(&b).ok());
    next->done.WaitForNotification();
    EXPECT_TRUE(IsOwnAnswer(*next, {.id = 22}));
  }
}

}  // namespace
}  // namespace rnnserve
