#pragma once

// The priority policy of the dynamic batcher: queued requests by level, level 1 first, each
// level oldest first. A request stays queued while any of its rows waits for a batch.
//
// Not thread-safe: the batcher guards it with its own lock.

#include <cstdint>
#include <list>
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "server/batching/queued_request.h"

namespace rnnserve::server::batching {

class RequestQueue {
 public:
  // Levels 1 .. levels; levels >= 1.
  explicit RequestQueue(int levels) : levels_(levels) {}

  // request->level() in [1, levels].
  void Push(std::shared_ptr<QueuedRequest> request);

  // Requests queued, finished ones not yet pruned included.
  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Drops requests that have finished (failed elsewhere) or have no rows left waiting.
  void Prune();

  // The first request in service order that has not finished; null when there is none.
  const std::shared_ptr<QueuedRequest>* Head() const;

  // Visits unfinished requests in service order until `visit` returns false.
  template <typename Visit>
  void ForEach(Visit visit) const {
    for (const auto& level : levels_) {
      for (const auto& r : level) {
        if (!r->finished() && !visit(r)) return;
      }
    }
  }

  // Removes and returns the requests whose deadline is at or before `now`.
  std::vector<std::shared_ptr<QueuedRequest>> TakeExpired(absl::Time now);
  // Removes and returns every request.
  std::vector<std::shared_ptr<QueuedRequest>> TakeAll();
  // The earliest deadline of a queued request; InfiniteFuture when none.
  absl::Time EarliestDeadline() const;

 private:
  // levels_[l - 1] holds level l in arrival order.
  std::vector<std::list<std::shared_ptr<QueuedRequest>>> levels_;
  int64_t size_ = 0;  // total over levels_
};

}  // namespace rnnserve::server::batching
