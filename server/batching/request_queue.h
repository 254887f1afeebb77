#pragma once

// The queue of the dynamic batcher: queued requests in fair_queue.h's order (callers take
// turns, a request each; within a caller level 1 first, then by arrival). A request stays
// queued while any of its rows waits for a batch; it counts as its caller's turn once all its
// rows are in batches.
//
// Not thread-safe: the batcher guards it with its own lock.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "server/batching/fair_queue.h"
#include "server/batching/queued_request.h"

namespace rnnserve::server::batching {

class RequestQueue {
 public:
  // Levels 1 .. levels; levels >= 1.
  explicit RequestQueue(int levels) : queue_(levels) {}

  // request->level() in [1, levels]; its caller is request->caller().
  void Push(std::shared_ptr<QueuedRequest> request);

  // Requests queued, finished ones not yet pruned included.
  int64_t size() const { return queue_.size(); }
  bool empty() const { return queue_.empty(); }

  // Drops requests that have finished (failed elsewhere) or have no rows left waiting.
  void Prune();

  // The first request in service order that has not finished; null when there is none.
  const std::shared_ptr<QueuedRequest>* Head() const;

  // Visits unfinished requests in service order until `visit` returns false.
  template <typename Visit>
  void ForEach(Visit visit) const {
    queue_.ForEach(
        [&](const std::shared_ptr<QueuedRequest>& r) { return r->finished() || visit(r); });
  }

  // Removes and returns the requests whose deadline is at or before `now`.
  std::vector<std::shared_ptr<QueuedRequest>> TakeExpired(absl::Time now);
  // Removes and returns every request.
  std::vector<std::shared_ptr<QueuedRequest>> TakeAll();
  // The earliest deadline of a queued request; InfiniteFuture when none.
  absl::Time EarliestDeadline() const;

 private:
  FairQueue<std::shared_ptr<QueuedRequest>> queue_;
};

}  // namespace rnnserve::server::batching
