#pragma once

// InstancePool: the instances of a model that no caller holds, for requests that run without
// the dynamic batcher (the batcher's workers own their instances; dynamic_batcher.h applies
// the same fault rule to them).
//
// FAULTS
//   An engine call that fails with INTERNAL is an engine fault (a CUDA or cuDNN error, not
//   something the request carried: bad input is INVALID_ARGUMENT). The instance is then probed
//   once with a small known-good batch: if the probe passes, the fault was transient and the
//   instance goes back to the pool; if it fails too, the instance leaves the pool for good and
//   the log says why. When no instance is left, Acquire fails with UNAVAILABLE at once instead
//   of waiting for an instance that will never free.
//
// ORDER
//   Callers waiting for an instance get it in fair_queue.h's order: the callers (Acquire's
//   `caller`) take turns, one request each, and a caller that had no one waiting is served
//   next; the requests of one caller in arrival order. AcquireInstance does not queue.
//
// THREADS
//   Thread-safe. The probe runs on the releasing caller's thread, outside the pool's lock,
//   while that caller still holds the instance.

#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/batching/fair_queue.h"

namespace rnnserve::server::batching {

// True for the statuses that mean the engine, not the request, failed.
bool IsEngineFault(const absl::Status& status);

class InstancePool {
 public:
  // Runs a known-good batch on `instance` after `fault`; OK when it still computes. The
  // owner's probe is also where the fault and its outcome get logged.
  using Probe = std::function<absl::Status(int instance, const absl::Status& fault)>;

  // Instances 0 .. count-1, all free. `name` names the model in errors and the log.
  InstancePool(std::string name, int count, Probe probe);

  // A free instance; DEADLINE_EXCEEDED when none frees before `deadline`, UNAVAILABLE when
  // every instance has left the pool. `abandoned` (null: never), asked every `poll` while it
  // waits, ends the wait with the status it returns when that is not OK (a cancelled caller).
  // `caller` (BatchRequest::caller) takes its turn in ORDER.
  absl::StatusOr<int> Acquire(absl::Time deadline,
                              const std::function<absl::Status()>& abandoned = nullptr,
                              absl::Duration poll = absl::Milliseconds(10),
                              const std::string& caller = "");
  // Instance `instance` once it is free; UNAVAILABLE when it has left the pool.
  absl::Status AcquireInstance(int instance);
  // Gives the instance back after a call that returned `status` (see FAULTS).
  void Release(int instance, const absl::Status& status);

  int healthy() const;
  // Callers waiting in Acquire.
  int64_t waiting() const;

 private:
  int HealthyLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One waiter of Acquire; its address is its place in waiters_.
  struct Ticket {};
  // Removes `ticket` from waiters_ (`served`: it got an instance) and updates next_.
  void Leave(const Ticket* ticket, bool served) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string name_;
  const Probe probe_;
  mutable absl::Mutex mu_;
  std::vector<int> free_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> retired_ ABSL_GUARDED_BY(mu_);  // left the pool for good
  absl::Status last_fault_ ABSL_GUARDED_BY(mu_);
  FairQueue<const Ticket*> waiters_ ABSL_GUARDED_BY(mu_){1};
  // The waiter the next free instance goes to (waiters_'s head); null when none waits.
  const Ticket* next_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace rnnserve::server::batching
