#include "server/batching/request_queue.h"

#include <algorithm>

namespace rnnserve::server::batching {

using Verdict = FairQueue<std::shared_ptr<QueuedRequest>>::Verdict;

void RequestQueue::Push(std::shared_ptr<QueuedRequest> request) {
  const std::string caller = request->caller();
  const int level = request->level();
  queue_.Push(caller, level, std::move(request));
}

void RequestQueue::Prune() {
  queue_.Remove([](const std::shared_ptr<QueuedRequest>& r) {
    if (r->pending_rows().empty()) return Verdict::kServed;  // every row is in a batch
    return r->finished() ? Verdict::kDropped : Verdict::kKeep;
  });
}

const std::shared_ptr<QueuedRequest>* RequestQueue::Head() const {
  const std::shared_ptr<QueuedRequest>* head = nullptr;
  queue_.ForEach([&](const std::shared_ptr<QueuedRequest>& r) {
    if (r->finished()) return true;
    head = &r;
    return false;
  });
  return head;
}

std::vector<std::shared_ptr<QueuedRequest>> RequestQueue::TakeExpired(absl::Time now) {
  return queue_.Remove([now](const std::shared_ptr<QueuedRequest>& r) {
    return r->deadline() <= now ? Verdict::kDropped : Verdict::kKeep;
  });
}

std::vector<std::shared_ptr<QueuedRequest>> RequestQueue::TakeAll() { return queue_.TakeAll(); }

absl::Time RequestQueue::EarliestDeadline() const {
  absl::Time earliest = absl::InfiniteFuture();
  queue_.ForEach([&](const std::shared_ptr<QueuedRequest>& r) {
    earliest = std::min(earliest, r->deadline());
    return true;
  });
  return earliest;
}

}  // namespace rnnserve::server::batching
