#pragma once

// A process-wide budget of request bytes in flight (--max-inflight-bytes), shared fairly among
// callers (fair_share.h). A request reserves its bytes (its serialized size, then its decoded
// tensors and an estimate of the engine's working memory for it: admission.h) when it is
// accepted and gives them back when its response has been built. A reservation that would take
// the total past the budget, or its caller past its share, is refused with RESOURCE_EXHAUSTED
// naming the bytes asked, the budget, the bytes in flight and the rule, and reserves nothing. A
// single request larger than the whole budget is refused the same way. Thread-safe; Reserve
// never blocks.
//
// WHEN NOT TO USE: it bounds what requests hold, not what the engines allocate once per model
// at load, nor gRPC's own buffers of requests not yet handed to a service
// (--max-message-bytes and the thread cap bound those).

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/limits/fair_share.h"

namespace rnnserve::server::limits {

class ByteBudget {
 public:
  struct Options {
    int64_t max_inflight_bytes = int64_t{1} << 30;  // 1 GiB; must be positive
    // Each caller's floor and the newcomers' reserve, in percent of max_inflight_bytes
    // (fair_share.h); 0..100, 100: first come, first served.
    int fair_floor_percent = 6;
  };
  static absl::StatusOr<std::unique_ptr<ByteBudget>> Create(const Options& options);

  // Bytes held for one request of one caller; released when destroyed. Movable, not copyable.
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& other) noexcept;
    Reservation& operator=(Reservation&& other) noexcept;
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    ~Reservation() { Release(); }
    // Reserves `bytes` more for the same request (RESOURCE_EXHAUSTED and no change when over
    // the budget or the caller's share). On an empty Reservation (no budget) it does nothing
    // and succeeds.
    absl::Status Add(int64_t bytes);
    int64_t bytes() const { return bytes_; }
    void Release();

   private:
    friend class ByteBudget;
    Reservation(ByteBudget* budget, std::string caller, int64_t bytes)
        : budget_(budget), caller_(std::move(caller)), bytes_(bytes) {}
    ByteBudget* budget_ = nullptr;
    std::string caller_;  // ShareKey
    int64_t bytes_ = 0;
  };

  // Reserves `bytes` (>= 0) for `caller` (a CallerIdentity) or refuses them.
  absl::StatusOr<Reservation> Reserve(const std::string& caller, int64_t bytes);

  int64_t inflight_bytes() const;
  int64_t max_inflight_bytes() const { return max_; }
  int64_t floor_bytes() const { return floor_; }

 private:
  ByteBudget(int64_t max, int64_t floor) : max_(max), floor_(floor) {}
  absl::Status Take(const std::string& key, int64_t bytes);
  void Give(const std::string& key, int64_t bytes);

  const int64_t max_;
  const int64_t floor_;
  mutable absl::Mutex mu_;
  ShareLedger ledger_ ABSL_GUARDED_BY(mu_);  // live Reservations by caller; total <= max_
};

// A budget's Reserve when `budget` is set, otherwise an empty Reservation (no limit).
absl::StatusOr<ByteBudget::Reservation> ReserveIn(ByteBudget* budget, const std::string& caller,
                                                  int64_t bytes);

}  // namespace rnnserve::server::limits
