#pragma once

// A clock that moves only when told to: for tests of schedulers.
//
// Advance() wakes every thread blocked in AwaitWithDeadline() so it can look at the new time;
// a waiter whose deadline has been reached returns. Threads that wait through this clock must
// not hold the mutex they wait on while calling Advance().

#include <atomic>
#include <cstdint>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/batching/clock.h"

namespace rnnserve::server::batching {

class FakeClock final : public Clock {
 public:
  // Starts at `start` (a fixed, arbitrary instant by default).
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000));

  absl::Time Now() const override;
  bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                         absl::Time deadline) const override;

  // Moves time forward by `d` (>= 0) and wakes the waiters.
  void Advance(absl::Duration d);
  void AdvanceMicros(int64_t us) { Advance(absl::Microseconds(us)); }

  // Threads blocked in AwaitWithDeadline right now.
  int waiters() const;
  // Calls of AwaitWithDeadline that went to sleep, since construction.
  int64_t sleeps() const;
  // Blocks until sleeps() >= n. A test uses it to know that a scheduler thread has looked at
  // its queue and gone to sleep, before it advances the clock.
  void AwaitSleeps(int64_t n) const;

 private:
  const absl::Time start_;
  // Nanoseconds since start_; read inside waiters' conditions, so it is atomic.
  std::atomic<int64_t> elapsed_ns_{0};

  mutable absl::Mutex waiters_mu_;
  // How many waiters block on each mutex. Lock order: waiters_mu_ before a waiter's mutex; a
  // waiter releases its own mutex before it takes waiters_mu_.
  mutable std::map<absl::Mutex*, int> waiters_ ABSL_GUARDED_BY(waiters_mu_);
  mutable int num_waiters_ ABSL_GUARDED_BY(waiters_mu_) = 0;
  mutable int64_t sleeps_ ABSL_GUARDED_BY(waiters_mu_) = 0;
};

}  // namespace rnnserve::server::batching
