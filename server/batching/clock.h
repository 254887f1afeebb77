#pragma once

// Time for schedulers, injected so that tests can stop it.
//
// A scheduler reads Now() and sleeps through AwaitWithDeadline(); it never calls absl::Now()
// or absl::SleepFor() itself. RealClock() is the wall clock; FakeClock (tests/support/
// fake_clock.h, in a test-only library) moves only when a test advances it, so a test can stand
// exactly on a boundary (9 us: nothing happens; 1 us more: the batch) without sleeping.

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace rnnserve::server::batching {

class Clock {
 public:
  virtual ~Clock() = default;

  virtual absl::Time Now() const = 0;

  // Blocks until `cond` holds or Now() reaches `deadline`, whichever comes first. `mu` is held
  // on entry and on return and is released while waiting, so the caller re-checks its state
  // afterwards. Returns cond's value on return.
  virtual bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                                 absl::Time deadline) const = 0;
};

// The wall clock (absl::Now). Never null; lives for the whole process.
const Clock* RealClock();

}  // namespace rnnserve::server::batching
