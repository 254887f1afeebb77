// The row split's team (engine/cpu/work_team.h): every task runs once per call, on a worker
// index in range, what the tasks wrote is visible to the caller when Run returns (plain
// stores, checked under TSan too), calls reuse the helpers, and a team of one or a call of one
// task runs on the caller alone.

#include "engine/cpu/work_team.h"

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace rnnserve::engine::cpu {
namespace {

TEST(WorkTeam, EveryTaskOnceAndItsWritesVisibleAfterRun) {
  for (int threads : {1, 2, 3, 5}) {
    WorkTeam team(threads);
    for (int call = 0; call < 200; ++call) {
      const int64_t tasks = 1 + call % 9;
      std::vector<int64_t> out(tasks, 0);  // plain: Run's return must order them
      std::vector<std::atomic<int>> runs(tasks);
      std::atomic<int> bad_worker{0};
      team.Run(tasks, [&](int worker, int64_t i) {
        if (worker < 0 || worker >= threads) bad_worker.fetch_add(1);
        runs[i].fetch_add(1, std::memory_order_relaxed);
        out[i] = call * 100 + i;
      });
      ASSERT_EQ(bad_worker.load(), 0) << threads << " threads";
      for (int64_t i = 0; i < tasks; ++i) {
        ASSERT_EQ(runs[i].load(), 1) << "task " << i << " of call " << call;
        ASSERT_EQ(out[i], call * 100 + i);
      }
    }
  }
}

TEST(WorkTeam, OneTaskOrOneThreadRunsOnTheCaller) {
  const std::thread::id caller = std::this_thread::get_id();
  WorkTeam two(2);
  two.Run(1, [&](int worker, int64_t) {
    EXPECT_EQ(worker, 0);
    EXPECT_EQ(std::this_thread::get_id(), caller);
  });
  WorkTeam one(1);
  one.Run(4, [&](int worker, int64_t) {
    EXPECT_EQ(worker, 0);
    EXPECT_EQ(std::this_thread::get_id(), caller);
  });
}

TEST(WorkTeam, CallerFinishesAloneWhileAHelperIsBusyElsewhereInTheCall) {
  // Task 0 blocks until another task has run: with a helper awake, the caller and the helper
  // together finish; the team must not deadlock when the caller holds task 0 and the helper
  // takes the rest, nor when the helper holds task 0 and the caller takes the rest.
  WorkTeam team(2);
  for (int call = 0; call < 50; ++call) {
    std::atomic<int> done{0};
    team.Run(3, [&](int, int64_t i) {
      if (i == 0) {
        while (done.load() == 0 && call % 2 == 0) std::this_thread::yield();
      } else {
        done.fetch_add(1);
      }
    });
    EXPECT_EQ(done.load(), 2);
  }
}

}  // namespace
}  // namespace rnnserve::engine::cpu
