#include "tests/support/fake_clock.h"

namespace rnnserve::server::batching {
namespace {

// cond || clock reached deadline; evaluated by absl::Mutex with the waiter's mutex held.
struct CondOrTime {
  const absl::Condition* cond;
  const FakeClock* clock;
  absl::Time deadline;
  bool operator()() const { return cond->Eval() || clock->Now() >= deadline; }
};

}  // namespace

FakeClock::FakeClock(absl::Time start) : start_(start) {}

absl::Time FakeClock::Now() const {
  return start_ + absl::Nanoseconds(elapsed_ns_.load(std::memory_order_acquire));
}

bool FakeClock::AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                                  absl::Time deadline) const {
  if (cond.Eval() || Now() >= deadline) return cond.Eval();
  mu->Unlock();
  {
    absl::MutexLock lock(&waiters_mu_);
    ++waiters_[mu];
    ++num_waiters_;
    ++sleeps_;
  }
  mu->Lock();
  const CondOrTime wake{&cond, this, deadline};
  mu->Await(absl::Condition(&wake));
  mu->Unlock();
  {
    absl::MutexLock lock(&waiters_mu_);
    if (--waiters_[mu] == 0) waiters_.erase(mu);
    --num_waiters_;
  }
  mu->Lock();
  return cond.Eval();
}

void FakeClock::Advance(absl::Duration d) {
  absl::MutexLock lock(&waiters_mu_);
  elapsed_ns_.fetch_add(absl::ToInt64Nanoseconds(d), std::memory_order_acq_rel);
  // Releasing a mutex makes absl re-evaluate the conditions of the threads waiting on it.
  for (auto& [mu, count] : waiters_) {
    mu->Lock();
    mu->Unlock();
  }
}

int FakeClock::waiters() const {
  absl::MutexLock lock(&waiters_mu_);
  return num_waiters_;
}

int64_t FakeClock::sleeps() const {
  absl::MutexLock lock(&waiters_mu_);
  return sleeps_;
}

void FakeClock::AwaitSleeps(int64_t n) const {
  struct AtLeast {
    const int64_t* count;
    int64_t n;
    bool operator()() const { return *count >= n; }
  };
  absl::MutexLock lock(&waiters_mu_);
  const AtLeast enough{&sleeps_, n};
  waiters_mu_.Await(absl::Condition(&enough));
}

}  // namespace rnnserve::server::batching
