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
                                          absl::Duration poll) {
  absl::MutexLock lock(&mu_);
  struct Ready {
    const InstancePool* p;
    bool operator()() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return !p->free_.empty() || p->HealthyLocked() == 0;
    }
  };
  const Ready ready{this};
  for (;;) {
    const absl::Time until = abandoned ? std::min(deadline, absl::Now() + poll) : deadline;
    if (mu_.AwaitWithDeadline(absl::Condition(&ready), until)) break;
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("model '", name_, "': the deadline passed while every instance was busy"));
    }
    if (!abandoned) continue;
    if (absl::Status s = abandoned(); !s.ok()) return s;
  }
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

int InstancePool::HealthyLocked() const {
  return static_cast<int>(std::count(retired_.begin(), retired_.end(), false));
}

}  // namespace rnnserve::server::batching
