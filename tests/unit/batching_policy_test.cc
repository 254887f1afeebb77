// The small policies of the dynamic batcher on their own: the fake clock, the step budget and
// the CPU thread share.

#include <thread>

#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "server/batching/batching_config.h"
#include "server/batching/instance_threads.h"
#include "server/batching/step_budget.h"
#include "tests/support/fake_clock.h"

namespace rnnserve::testing {
namespace {

using server::batching::CpuThreadsPerInstance;
using server::batching::FakeClock;
using server::batching::StepBudget;

// config.pbtxt's dynamic_batching block -> the batcher's options.
server::batching::DynamicBatcherOptions OptionsOf(const std::string& text) {
  v1::ModelConfig config;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &config));
  auto o = server::batching::BatcherOptionsFromConfig(config, {true}, {false});
  EXPECT_TRUE(o.ok()) << o.status();
  return o.ok() ? *o : server::batching::DynamicBatcherOptions{};
}

TEST(BatchingConfigTest, DescriptionSaysTheQueueDelayIsUnusedWithoutWaitWhenIdle) {
  const std::string work_conserving = server::batching::DescribeForming(
      OptionsOf(R"pb(name: "m"
                     max_batch_size: 8
                     dynamic_batching { max_queue_delay_microseconds: 500 })pb"));
  EXPECT_EQ(work_conserving,
            "dynamic batching up to 8 sequences, work-conserving (a free instance takes what is "
            "queued at once); max_queue_delay_microseconds and preferred_batch_size are unused "
            "without wait_for_delay_when_idle");
  EXPECT_EQ(work_conserving.find("500"), std::string::npos) << work_conserving;
  EXPECT_EQ(server::batching::DescribeForming(OptionsOf(R"pb(name: "m"
                                                             max_batch_size: 8
                                                             dynamic_batching {})pb")),
            "dynamic batching up to 8 sequences, work-conserving (a free instance takes what is "
            "queued at once)");
  EXPECT_EQ(server::batching::DescribeForming(OptionsOf(R"pb(name: "m"
                                                             max_batch_size: 8
                                                             dynamic_batching {
                                                               max_queue_delay_microseconds: 500
                                                               preferred_batch_size: [ 4, 8 ]
                                                               wait_for_delay_when_idle: true
                                                             })pb")),
            "dynamic batching up to 8 sequences, a free instance waits up to 500 us for a full "
            "batch or one of 4, 8 sequences");
}

TEST(BatchingConfigTest, WorkConservingUnlessTheConfigAsksToWaitWhenIdle) {
  EXPECT_FALSE(OptionsOf(R"pb(name: "m"
                              max_batch_size: 8
                              dynamic_batching { max_queue_delay_microseconds: 500 })pb")
                   .wait_when_idle);
  const auto waiting = OptionsOf(R"pb(name: "m"
                                      max_batch_size: 8
                                      dynamic_batching {
                                        max_queue_delay_microseconds: 500
                                        wait_for_delay_when_idle: true
                                      })pb");
  EXPECT_TRUE(waiting.wait_when_idle);
  EXPECT_EQ(waiting.max_queue_delay_us, 500);
}

TEST(FakeClockTest, AdvanceMovesNowByExactlyTheDuration) {
  FakeClock clock;
  const absl::Time start = clock.Now();
  clock.AdvanceMicros(9);
  EXPECT_EQ(clock.Now() - start, absl::Microseconds(9));
  clock.Advance(absl::Nanoseconds(1));
  EXPECT_EQ(clock.Now() - start, absl::Microseconds(9) + absl::Nanoseconds(1));
}

TEST(FakeClockTest, WaiterWakesWhenTheClockReachesItsDeadlineNotBefore) {
  FakeClock clock;
  absl::Mutex mu;
  bool never = false;
  bool woke = false;
  const absl::Time deadline = clock.Now() + absl::Microseconds(10);
  std::thread waiter([&] {
    absl::MutexLock lock(&mu);
    EXPECT_FALSE(clock.AwaitWithDeadline(&mu, absl::Condition(&never), deadline));
    woke = true;
  });
  clock.AwaitSleeps(1);
  clock.AdvanceMicros(9);
  {
    absl::MutexLock lock(&mu);
    EXPECT_FALSE(woke);
  }
  clock.AdvanceMicros(1);
  waiter.join();
  EXPECT_TRUE(woke);
  EXPECT_EQ(clock.waiters(), 0);
}

TEST(FakeClockTest, WaiterWakesWhenItsConditionTurnsTrue) {
  FakeClock clock;
  absl::Mutex mu;
  bool ready = false;
  std::thread waiter([&] {
    absl::MutexLock lock(&mu);
    EXPECT_TRUE(clock.AwaitWithDeadline(&mu, absl::Condition(&ready), absl::InfiniteFuture()));
  });
  clock.AwaitSleeps(1);
  {
    absl::MutexLock lock(&mu);
    ready = true;
  }
  waiter.join();
}

TEST(StepBudgetTest, AdmitsSequencesWhileComputedStaysWithinTheRatio) {
  StepBudget budget(1.1);
  EXPECT_TRUE(budget.Fits(100));
  budget.Add(100);
  EXPECT_TRUE(budget.Fits(91));    // 200 computed <= 1.1 x 191
  EXPECT_FALSE(budget.Fits(81));   // 200 computed > 1.1 x 181
  EXPECT_FALSE(budget.Fits(125));  // 250 computed > 1.1 x 225
  EXPECT_TRUE(budget.Fits(110));   // 220 computed <= 1.1 x 210
  budget.Add(91);
  EXPECT_EQ(budget.real_steps(), 191);
  EXPECT_EQ(budget.computed_steps(), 200);
}

TEST(StepBudgetTest, ZeroRatioAdmitsEveryLength) {
  StepBudget budget(0);
  budget.Add(500);
  EXPECT_TRUE(budget.Fits(1));
  budget.Add(1);
  EXPECT_EQ(budget.computed_steps(), 1000);
}

TEST(CpuThreadsPerInstanceTest, InstancesShareTheCoresWithoutOversubscription) {
  EXPECT_EQ(CpuThreadsPerInstance(16, 4, 0), 4);
  EXPECT_EQ(CpuThreadsPerInstance(16, 3, 0), 5);
  EXPECT_EQ(CpuThreadsPerInstance(2, 4, 0), 1);
  EXPECT_EQ(CpuThreadsPerInstance(16, 1, 0), 16);
}

TEST(CpuThreadsPerInstanceTest, ConfiguredThreadsAreHonoured) {
  EXPECT_EQ(CpuThreadsPerInstance(16, 4, 8), 8);
  EXPECT_EQ(CpuThreadsPerInstance(2, 4, 3), 3);
}

}  // namespace
}  // namespace rnnserve::testing
