#include "server/batching/instance_pool.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace rnnserve::server::batching {

bool IsEngineFault(const absl::Status& status) { return absl::IsInternal(status); }

InstancePool::InstancePool(std::string name, int count, Probe probe)
    : name_(std::move(name)), probe_(std::move(probe)), retired_(count, false) {
  for (int i = 0; i < count; ++i) free_.push_back(i);
}

absl::StatusOr<int> InstancePool::Acquire(absl::Time deadline,
                                          const std::function<absl::Status()>& abandoned,
                                          absl::Duration poll, const std::string& caller) {
  absl::MutexLock lock(&mu_);
  const Ticket ticket;
  waiters_.Push(caller, 1, &ticket);
  next_ = *waiters_.Head();  // a caller that had no one waiting goes first
  struct Ready {
    const InstancePool* p;
    const Ticket* ticket;
    bool operator()() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return (!p->free_.empty() && p->next_ == ticket) || p->HealthyLocked() == 0;
    }
  };
  const Ready ready{this, &ticket};
  for (;;) {
    const absl::Time until = abandoned ? std::min(deadline, absl::Now() + poll) : deadline;
    if (mu_.AwaitWithDeadline(absl::Condition(&ready), until)) break;
    if (absl::Now() >= deadline) {
      Leave(&ticket, /*served=*/false);
      return absl::DeadlineExceededError(
          absl::StrCat("model '", name_, "': the deadline passed while every instance was busy"));
    }
    if (!abandoned) continue;
    if (absl::Status s = abandoned(); !s.ok()) {
      Leave(&ticket, /*served=*/false);
      return s;
    }
  }
  Leave(&ticket, /*served=*/HealthyLocked() > 0);
  if (HealthyLocked() == 0) {
    return absl::UnavailableError(absl::StrCat("model '", name_,
                                               "': every instance failed and left rotation; "
                                               "last engine error: ",
                                               last_fault_.message()));
  }
  const int index = free_.back();
  free_.pop_back();
  return index;
}

void InstancePool::Leave(const Ticket* ticket, bool served) {
  using Verdict = FairQueue<const Ticket*>::Verdict;
  waiters_.Remove([&](const Ticket* t) {
    return t != ticket ? Verdict::kKeep : served ? Verdict::kServed : Verdict::kDropped;
  });
  const Ticket* const* head = waiters_.Head();
  next_ = head == nullptr ? nullptr : *head;
}

absl::Status InstancePool::AcquireInstance(int instance) {
  absl::MutexLock lock(&mu_);
  struct Wanted {
    const InstancePool* p;
    int index;
    bool operator()() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return p->retired_[index] ||
             std::find(p->free_.begin(), p->free_.end(), index) != p->free_.end();
    }
  };
  const Wanted wanted{this, instance};
  mu_.Await(absl::Condition(&wanted));
  if (retired_[instance]) {
    return absl::UnavailableError(
        absl::StrCat("model '", name_, "': instance ", instance,
                     " failed and left rotation: ", last_fault_.message()));
  }
  free_.erase(std::find(free_.begin(), free_.end(), instance));
  return absl::OkStatus();
}

void InstancePool::Release(int instance, const absl::Status& status) {
  const bool fault = IsEngineFault(status);
  const bool keep = !fault || !probe_ || probe_(instance, status).ok();
  absl::MutexLock lock(&mu_);
  if (fault) last_fault_ = status;
  if (keep) {
    free_.push_back(instance);
  } else {
    retired_[instance] = true;
  }
}

int InstancePool::healthy() const {
  absl::MutexLock lock(&mu_);
  return HealthyLocked();
}

int64_t InstancePool::waiting() const {
  absl::MutexLock lock(&mu_);
  return waiters_.size();
}

int InstancePool::HealthyLocked() const {
  return static_cast<int>(std::count(retired_.begin(), retired_.end(), false));
}

}  // namespace rnnserve::server::batching
