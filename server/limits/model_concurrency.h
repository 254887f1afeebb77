#pragma once

// A cap on requests running at once on one model version without dynamic batching
// (--max-concurrent-per-model). Without a batcher each request runs on its caller's thread and
// waits there for a free instance, holding its decoded tensors: nothing else bounds how many
// wait. A request over the cap is refused at once with RESOURCE_EXHAUSTED naming the cap
// (no waiting: the caller's retry policy decides, and a refused request holds no thread).
// Models with dynamic batching are bounded by their queue (max_queue_size) instead.
// The cap is shared fairly among callers (fair_share.h: each caller's share of it, the floor
// and the newcomers' reserve), so a caller that floods a model is refused before a light one.
// Thread-safe.

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/limits/fair_share.h"

namespace rnnserve::server::limits {

class ModelConcurrency {
 public:
  struct Options {
    // Requests at once per model version. 0: kPerInstance times the model's instance count,
    // plus the newcomers' reserve on top (its ShareFloor; none at fair_floor_percent 100), so
    // that one caller alone still runs kPerInstance per instance. Must not be negative.
    int max_concurrent_per_model = 0;
    // Each caller's floor and the newcomers' reserve, in percent of the cap (fair_share.h; at
    // least one request); 0..100, 100: first come, first served.
    int fair_floor_percent = 6;
  };
  static constexpr int kPerInstance = 8;
  static absl::StatusOr<std::unique_ptr<ModelConcurrency>> Create(const Options& options);

  // A running request's place; gives it back when destroyed. Movable, not copyable.
  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& other) noexcept;
    Slot& operator=(Slot&& other) noexcept;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() { Release(); }
    void Release();

   private:
    friend class ModelConcurrency;
    Slot(ModelConcurrency* owner, const void* key, std::string caller)
        : owner_(owner), key_(key), caller_(std::move(caller)) {}
    ModelConcurrency* owner_ = nullptr;
    const void* key_ = nullptr;
    std::string caller_;  // ShareKey
  };

  // Takes a place for `caller` (a CallerIdentity) on model version `key` (its Servable), named
  // `model` in the message, which has `instances` instances.
  absl::StatusOr<Slot> Acquire(const void* key, const std::string& model, int instances,
                               const std::string& caller);
  // The cap for a model of `instances` instances.
  int LimitFor(int instances) const;

 private:
  explicit ModelConcurrency(const Options& options) : options_(options) {}
  void Give(const void* key, const std::string& caller);

  const Options options_;
  absl::Mutex mu_;
  // Running requests by model version and caller; no empty ledgers.
  std::map<const void*, ShareLedger> running_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rnnserve::server::limits
