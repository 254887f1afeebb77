// InstancePool: the instances a model's requests take when they run without the batcher. An
// engine fault (INTERNAL) triggers one probe; an instance that fails it leaves for good.

#include "server/batching/instance_pool.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

#include "gtest/gtest.h"

namespace rnnserve::testing {
namespace {

using server::batching::InstancePool;

// A probe that passes for the instances in `healthy` and counts its calls.
struct FakeProbe {
  std::vector<bool> healthy;
  int calls = 0;
  InstancePool::Probe Get() {
    return [this](int i, const absl::Status&) {
      ++calls;
      return healthy[i] ? absl::OkStatus() : absl::InternalError("probe failed");
    };
  }
};

TEST(InstancePoolTest, TransientFaultKeepsTheInstanceAfterOneProbe) {
  FakeProbe probe{{true}};
  InstancePool pool("m", 1, probe.Get());
  auto i = pool.Acquire(absl::InfiniteFuture());
  ASSERT_TRUE(i.ok());
  pool.Release(*i, absl::InternalError("cudnnRNNForward: CUDNN_STATUS_EXECUTION_FAILED"));
  EXPECT_EQ(probe.calls, 1);
  EXPECT_EQ(pool.healthy(), 1);
  auto again = pool.Acquire(absl::InfiniteFuture());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 0);
}

TEST(InstancePoolTest, RequestErrorsAreNotFaultsAndNeverProbe) {
  FakeProbe probe{{false}};
  InstancePool pool("m", 1, probe.Get());
  ASSERT_TRUE(pool.Acquire(absl::InfiniteFuture()).ok());
  pool.Release(0, absl::InvalidArgumentError("input 'x': expected 2 features"));
  ASSERT_TRUE(pool.Acquire(absl::InfiniteFuture()).ok());
  pool.Release(0, absl::DeadlineExceededError("late"));
  EXPECT_EQ(probe.calls, 0);
  EXPECT_EQ(pool.healthy(), 1);
}

TEST(InstancePoolTest, FailedProbeRetiresTheInstanceAndTheOtherServes) {
  FakeProbe probe{{false, true}};
  InstancePool pool("m", 2, probe.Get());
  ASSERT_TRUE(pool.AcquireInstance(0).ok());
  pool.Release(0, absl::InternalError("illegal memory access"));
  EXPECT_EQ(pool.healthy(), 1);
  for (int k = 0; k < 3; ++k) {
    auto i = pool.Acquire(absl::InfiniteFuture());
    ASSERT_TRUE(i.ok());
    EXPECT_EQ(*i, 1);
    pool.Release(*i, absl::OkStatus());
  }
  const absl::Status s = pool.AcquireInstance(0);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("illegal memory access"), std::string::npos) << s;
}

TEST(InstancePoolTest, WhenEveryInstanceHasLeftAcquireIsUnavailableAtOnce) {
  FakeProbe probe{{false}};
  InstancePool pool("m", 1, probe.Get());
  ASSERT_TRUE(pool.Acquire(absl::InfiniteFuture()).ok());
  pool.Release(0, absl::InternalError("device lost"));
  const auto s = pool.Acquire(absl::InfiniteFuture());  // would block forever without the rule
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.status().message().find("model 'm'"), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("device lost"), std::string::npos) << s.status();
}

TEST(InstancePoolTest, BusyPoolPastTheDeadlineIsDeadlineExceeded) {
  InstancePool pool("m", 1, nullptr);
  ASSERT_TRUE(pool.Acquire(absl::InfiniteFuture()).ok());
  const auto s = pool.Acquire(absl::Now() - absl::Seconds(1));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(InstancePoolTest, WaitingCallersTakeTurnsAndANewcomerIsServedNext) {
  InstancePool pool("m", 1, nullptr);
  ASSERT_TRUE(pool.Acquire(absl::InfiniteFuture()).ok());  // busy
  absl::Mutex mu;
  std::vector<std::string> order;
  std::vector<std::thread> waiters;
  auto wait_as = [&](const std::string& caller, const std::string& name) {
    waiters.emplace_back([&, caller, name] {
      auto i = pool.Acquire(absl::InfiniteFuture(), nullptr, absl::Milliseconds(10), caller);
      ASSERT_TRUE(i.ok());
      {
        absl::MutexLock lock(&mu);
        order.push_back(name);
      }
      pool.Release(*i, absl::OkStatus());
    });
    // Each waits before the next comes: their arrival order is known.
    while (pool.waiting() < static_cast<int64_t>(waiters.size())) std::this_thread::yield();
  };
  wait_as("flood", "f1");
  wait_as("flood", "f2");
  wait_as("flood", "f3");
  wait_as("polite", "p1");
  pool.Release(0, absl::OkStatus());
  for (auto& t : waiters) t.join();
  EXPECT_EQ(order, (std::vector<std::string>{"f1", "p1", "f2", "f3"}));
}

}  // namespace
}  // namespace rnnserve::testing
