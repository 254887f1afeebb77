#pragma once

// FairQueue: the order in which a model serves the requests that wait for it, so that a
// caller with many requests queued does not keep a caller with few waiting behind all of them.
// Used by the dynamic batcher's queue (request_queue.h) and by the direct scheduler's wait for
// a thread and an instance (direct_scheduler.h, instance_pool.h).
//
// ORDER (start-time fair queuing over callers, one unit per request)
//   - Callers are server/limits/caller_identity.h's ShareKey (a token's hash, else a host);
//     "" is one caller like any other (requests of unknown origin share one turn).
//   - Within a caller: by level (1 first: Triton's priority levels, honoured inside the
//     caller's share), then by arrival.
//   - Across callers: each caller's k-th request in its own order has the tag start + k, where
//     `start` is the caller's tag when it last became active plus one per request of it served
//     since. A caller becomes active at the tag of the last request served (it waits for no
//     one who has had a turn since), or at the tag its previous requests reached if that is
//     later (coming back at once buys no extra turn). The queue serves the smallest tag first;
//     equal tags in the order their callers became active. So callers with requests queued take
//     turns, one request each, and a newcomer is served next.
//   A request removed without being served (cancelled, expired) gives no turn away.
//
// Not thread-safe: its owner locks. Costs O(n log n) per ordered visit, for n queued.

#include <algorithm>
#include <cstdint>
#include <list>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace rnnserve::server::batching {

template <typename T>
class FairQueue {
 public:
  // Levels 1 .. levels; levels >= 1.
  explicit FairQueue(int levels) : levels_(std::max(1, levels)) {}

  // `level` in [1, levels] (clamped).
  void Push(const std::string& caller, int level, T item) {
    auto [it, added] = callers_.try_emplace(caller);
    Caller& c = it->second;
    if (added) {
      // Back after its last request was served: not before that request's turn ends.
      auto left = left_.find(caller);
      c.start = left == left_.end() ? served_tag_ : std::max(served_tag_, left->second);
      if (left != left_.end()) left_.erase(left);
      c.since = next_seq_;
      c.levels.resize(levels_);
    }
    level = std::clamp(level, 1, levels_);
    c.levels[level - 1].push_back({next_seq_++, std::move(item)});
    ++c.size;
    ++size_;
  }

  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Visits queued items in service order (ORDER) until `visit(const T&)` returns false.
  template <typename Visit>
  void ForEach(Visit visit) const {
    for (const Entry& e : Ordered()) {
      if (!visit(*e.item)) return;
    }
  }

  // The first item in service order; null when empty.
  const T* Head() const {
    const T* head = nullptr;
    ForEach([&](const T& item) {
      head = &item;
      return false;
    });
    return head;
  }

  // Removes the items for which `verdict(const T&)` says kServed or kDropped; served ones count
  // as their caller's turns. Returns the removed items in service order.
  enum class Verdict { kKeep, kServed, kDropped };
  template <typename Judge>
  std::vector<T> Remove(Judge verdict) {
    std::vector<T> removed;
    for (const Entry& e : Ordered()) {
      const Verdict v = verdict(*e.item);
      if (v == Verdict::kKeep) continue;
      Caller& c = callers_.at(*e.caller);
      if (v == Verdict::kServed) {
        served_tag_ = std::max(served_tag_, e.tag);
        ++c.start;
      }
      auto& list = c.levels[e.level];
      for (auto it = list.begin(); it != list.end(); ++it) {
        if (it->seq == e.seq) {
          removed.push_back(std::move(it->item));
          list.erase(it);
          break;
        }
      }
      --c.size;
      --size_;
    }
    for (auto it = callers_.begin(); it != callers_.end();) {
      if (it->second.size > 0) {
        ++it;
        continue;
      }
      left_[it->first] = it->second.start;
      it = callers_.erase(it);
    }
    // A caller whose next turn has come anyway starts at served_tag_ when it comes back.
    std::erase_if(left_, [this](const auto& kv) { return kv.second <= served_tag_; });
    return removed;
  }

  // Removes every item, in service order; no turns are counted.
  std::vector<T> TakeAll() {
    return Remove([](const T&) { return Verdict::kDropped; });
  }

 private:
  struct Item {
    uint64_t seq;  // arrival order over the whole queue
    T item;
  };
  struct Caller {
    int64_t start = 0;                    // the tag of its first request in its own order
    uint64_t since = 0;                   // when it became active (a seq): breaks equal tags
    int64_t size = 0;                     // items over levels
    std::vector<std::list<Item>> levels;  // levels[l - 1]: level l in arrival order
  };
  struct Entry {
    int64_t tag;
    uint64_t since;  // its caller's
    uint64_t seq;
    const std::string* caller;
    int level;  // index into Caller::levels
    const T* item;
  };

  std::vector<Entry> Ordered() const {
    std::vector<Entry> entries;
    entries.reserve(size_);
    for (const auto& [name, c] : callers_) {
      int64_t k = 0;
      for (int l = 0; l < levels_; ++l) {
        for (const Item& i : c.levels[l]) {
          entries.push_back({c.start + k++, c.since, i.seq, &name, l, &i.item});
        }
      }
    }
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
      return std::tie(a.tag, a.since, a.seq) < std::tie(b.tag, b.since, b.seq);
    });
    return entries;
  }

  const int levels_;
  std::map<std::string, Caller> callers_;  // callers with items queued
  // Callers that left with a turn still ahead of served_tag_: the tag they come back at.
  std::map<std::string, int64_t> left_;
  int64_t served_tag_ = 0;  // the largest tag served so far
  uint64_t next_seq_ = 0;
  int64_t size_ = 0;
};

}  // namespace rnnserve::server::batching
