#include "server/batching/abandon_watch.h"

#include <utility>

namespace rnnserve::server::batching {

absl::Status Abandoned(const std::function<bool()>& cancelled, absl::Time deadline,
                       absl::Time now) {
  if (cancelled && cancelled()) return absl::CancelledError("the client cancelled the call");
  if (now >= deadline) {
    return absl::DeadlineExceededError("the request's deadline passed");
  }
  return absl::OkStatus();
}

std::function<bool()> StopWhenAbandoned(std::function<bool()> cancelled, absl::Time deadline,
                                        const Clock* clock) {
  if (!cancelled && deadline == absl::InfiniteFuture()) return nullptr;
  // Batch::stop is called by one thread at a time: the state needs no lock.
  return [cancelled = std::move(cancelled), deadline, clock, next = absl::InfinitePast(),
          stopped = false]() mutable {
    if (stopped) return true;
    const absl::Time now = clock->Now();
    if (now < next) return false;
    next = now + kStopAskInterval;
    stopped = !Abandoned(cancelled, deadline, now).ok();
    return stopped;
  };
}

AbandonWatch::AbandonWatch(absl::Duration poll_interval)
    : poll_interval_(poll_interval), thread_([this] { Work(); }) {}

AbandonWatch::~AbandonWatch() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void AbandonWatch::Watch(Check check) {
  absl::MutexLock lock(&mu_);
  checks_.push_back(std::move(check));
}

void AbandonWatch::Work() {
  struct Wake {
    const AbandonWatch* w;
    bool operator()() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return w->stopping_ || !w->checks_.empty();
    }
  };
  const Wake wake{this};
  for (;;) {
    std::vector<Check> checks;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&wake));  // sleeps while nothing is watched
      if (stopping_) return;
      checks.swap(checks_);
    }
    std::vector<Check> again;
    for (Check& check : checks) {
      if (!check()) again.push_back(std::move(check));
    }
    absl::MutexLock lock(&mu_);
    for (Check& check : again) checks_.push_back(std::move(check));
    if (checks_.empty()) continue;
    // The next round after poll_interval_, or at once when stopping.
    struct Stopping {
      const AbandonWatch* w;
      bool operator()() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return w->stopping_; }
    };
    const Stopping stopping{this};
    mu_.AwaitWithTimeout(absl::Condition(&stopping), poll_interval_);
    if (stopping_) return;
  }
}

}  // namespace rnnserve::server::batching
