#include "server/batching/instance_pool.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rnnserve::server::batching {

bool IsEngineFault(const absl::Status& status) { return absl::IsInternal(status); }

InstancePool::InstancePool(std::string name, int count, Probe probe)
    : name_(std::move(name)), probe_(std::move(probe)), retired_(count, false), healthy_(count) {
  for (int i = 0; i < count; ++i) free_.push_back(i);
}

absl::StatusOr<int> InstancePool::Acquire(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  struct Ready {
    const InstancePool* p;
    bool operator()() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return !p->free_.empty() || p->healthy_ == 0;
    }
  };
  const Ready ready{this};
  if (!mu_.AwaitWithDeadline(absl::Condition(&ready), deadline)) {
    return absl::DeadlineExceededError(
        absl::StrCat("model '", name_, "': the deadline passed while every instance was busy"));
  }
  if (healthy_ == 0) {
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
  bool keep = true;
  if (IsEngineFault(status)) {
    const absl::Status probe = probe_ ? probe_(instance, status) : absl::OkStatus();
    keep = probe.ok();
    absl::MutexLock lock(&mu_);
    last_fault_ = status;
    if (!keep) {
      retired_[instance] = true;
      --healthy_;
    }
  }
  if (keep) {
    absl::MutexLock lock(&mu_);
    free_.push_back(instance);
  }
}

int InstancePool::healthy() const {
  absl::MutexLock lock(&mu_);
  return healthy_;
}

}  // namespace rnnserve::server::batching
