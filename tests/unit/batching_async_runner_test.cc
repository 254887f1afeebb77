// AsyncRunner (server/batching/async_runner.h): tasks run in order on its threads; at
// destruction the ones not started are told so, and the running ones finish.

#include "server/batching/async_runner.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace rnnserve::testing {
namespace {

using server::batching::AsyncRunner;

TEST(AsyncRunnerTest, OneThreadRunsTasksInTheOrderPostedOffTheCallersThread) {
  absl::Mutex mu;
  std::vector<int> order;
  std::vector<bool> on_runner;
  absl::Notification last;
  {
    AsyncRunner runner(1);
    for (int i = 0; i < 5; ++i) {
      runner.Post([&, i](bool run) {
        EXPECT_TRUE(run);
        absl::MutexLock lock(&mu);
        order.push_back(i);
        on_runner.push_back(runner.IsRunnerThread());
        if (i == 4) last.Notify();
      });
    }
    EXPECT_FALSE(runner.IsRunnerThread());
    last.WaitForNotification();
  }
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(on_runner, std::vector<bool>(5, true));
}

TEST(AsyncRunnerTest, DestructionTellsQueuedTasksTheyDidNotRunAndFinishesTheRunningOne) {
  absl::Notification started, release;
  bool first_ran = false;
  std::atomic<int> not_run{0};
  auto runner = std::make_unique<AsyncRunner>(1);
  runner->Post([&](bool run) {
    started.Notify();
    release.WaitForNotification();
    first_ran = run;
  });
  started.WaitForNotification();
  for (int i = 0; i < 3; ++i) runner->Post([&](bool run) { not_run += run ? 0 : 1; });
  std::thread destroy([&] { runner.reset(); });
  while (not_run < 3) std::this_thread::yield();  // the destructor fails the queued first
  release.Notify();
  destroy.join();
  EXPECT_TRUE(first_ran);
  EXPECT_EQ(not_run, 3);
}

}  // namespace
}  // namespace rnnserve::testing
