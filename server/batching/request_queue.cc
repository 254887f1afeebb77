#include "server/batching/request_queue.h"

#include <algorithm>

namespace rnnserve::server::batching {

void RequestQueue::Push(std::shared_ptr<QueuedRequest> request) {
  levels_[request->level() - 1].push_back(std::move(request));
  ++size_;
}

void RequestQueue::Prune() {
  for (auto& level : levels_) {
    size_ -= static_cast<int64_t>(level.size());
    level.remove_if([](const std::shared_ptr<QueuedRequest>& r) {
      return r->finished() || r->pending_rows().empty();
    });
    size_ += static_cast<int64_t>(level.size());
  }
}

const std::shared_ptr<QueuedRequest>* RequestQueue::Head() const {
  for (const auto& level : levels_) {
    for (const auto& r : level) {
      if (!r->finished()) return &r;
    }
  }
  return nullptr;
}

std::vector<std::shared_ptr<QueuedRequest>> RequestQueue::TakeExpired(absl::Time now) {
  std::vector<std::shared_ptr<QueuedRequest>> expired;
  for (auto& level : levels_) {
    for (auto it = level.begin(); it != level.end();) {
      if ((*it)->deadline() <= now) {
        expired.push_back(std::move(*it));
        it = level.erase(it);
        --size_;
      } else {
        ++it;
      }
    }
  }
  return expired;
}

std::vector<std::shared_ptr<QueuedRequest>> RequestQueue::TakeAll() {
  std::vector<std::shared_ptr<QueuedRequest>> all;
  for (auto& level : levels_) {
    for (auto& r : level) all.push_back(std::move(r));
    level.clear();
  }
  size_ = 0;
  return all;
}

absl::Time RequestQueue::EarliestDeadline() const {
  absl::Time earliest = absl::InfiniteFuture();
  for (const auto& level : levels_) {
    for (const auto& r : level) earliest = std::min(earliest, r->deadline());
  }
  return earliest;
}

}  // namespace rnnserve::server::batching
