#pragma once

// AbandonWatch: finds the requests whose caller gave up while they wait or run, so that a
// scheduler answers them at once and stops their work (a client cancel, a deadline, a call that
// the server's shutdown cancelled).
//
// gRPC tells a handler of a cancel only when asked (ServerContext::IsCancelled); nothing wakes
// a scheduler. A scheduler therefore hands each request it queues to its watch as a check; the
// watch's thread runs every check once per poll_interval while it holds any, and sleeps while
// it holds none. A check answers the request (CANCELLED or DEADLINE_EXCEEDED) when its caller
// gave up, and says when it need not run again: the request was answered, or started running
// (then the engine's Batch::stop, engine/engine.h, asks between steps).
//
// Checks run on the watch's thread, one at a time, outside the watch's lock; they must not
// block for long. The destructor runs no more checks and joins the thread.

#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/batching/batch_request.h"
#include "server/batching/clock.h"

namespace rnnserve::server::batching {

// How often a waiting request's cancel is looked at: the longest a cancelled or expired request
// stays queued, and (with the engine's kStopCheckSteps) about the most a running one computes
// after its caller gave up.
inline constexpr absl::Duration kAbandonPollInterval = absl::Milliseconds(10);

// Why a caller no longer wants its answer at `now`: CANCELLED when `cancelled` (may be null)
// says its client cancelled, DEADLINE_EXCEEDED when `deadline` passed; OK while it is wanted.
// For a request: must not be called once its `done` has started (the client's context may be
// gone).
absl::Status Abandoned(const std::function<bool()>& cancelled, absl::Time deadline, absl::Time now);
inline absl::Status Abandoned(const BatchRequest& request, absl::Time now) {
  return Abandoned(request.cancelled, request.deadline, now);
}

// Whether a request can be abandoned before it is answered at all: it has a cancel check or a
// deadline.
inline bool CanBeAbandoned(const BatchRequest& request) {
  return request.cancelled != nullptr || request.deadline != absl::InfiniteFuture();
}

// A Batch::stop for an engine call that runs one caller's request (engine/engine.h): true once
// Abandoned(cancelled, deadline) says so at the clock's time; asks at most every
// kStopAskInterval, however often the engine asks. Null when neither can happen. What
// `cancelled` reads and `clock` must outlive the engine call.
inline constexpr absl::Duration kStopAskInterval = absl::Milliseconds(1);
std::function<bool()> StopWhenAbandoned(std::function<bool()> cancelled, absl::Time deadline,
                                        const Clock* clock);

class AbandonWatch {
 public:
  // Returns true when it need not run again.
  using Check = std::function<bool()>;

  explicit AbandonWatch(absl::Duration poll_interval = kAbandonPollInterval);
  ~AbandonWatch();
  AbandonWatch(const AbandonWatch&) = delete;
  AbandonWatch& operator=(const AbandonWatch&) = delete;

  void Watch(Check check);

 private:
  void Work();

  const absl::Duration poll_interval_;
  absl::Mutex mu_;
  std::vector<Check> checks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // started in the constructor, joined in the destructor
};

}  // namespace rnnserve::server::batching
