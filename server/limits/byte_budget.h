#pragma once

// A process-wide budget of request bytes in flight (--max-inflight-bytes). A request reserves
// its bytes (its serialized size, then its decoded tensors) when it is accepted and gives them
// back when its response has been built; a reservation that would take the total past the
// budget is refused with RESOURCE_EXHAUSTED naming the bytes asked, the budget and the bytes
// in flight, and reserves nothing. A single request larger than the whole budget is refused
// the same way. Thread-safe; Reserve never blocks.
//
// WHEN NOT TO USE: it bounds what requests hold, not what the engines allocate (scratch is
// sized per model at load) nor gRPC's own buffers of requests not yet handed to a service
// (--max-message-bytes and the thread cap bound those).

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rnnserve::server::limits {

class ByteBudget {
 public:
  struct Options {
    int64_t max_inflight_bytes = int64_t{1} << 30;  // 1 GiB; must be positive
  };
  static absl::StatusOr<std::unique_ptr<ByteBudget>> Create(const Options& options);

  // Bytes held for one request; released when destroyed. Movable, not copyable.
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& other) noexcept;
    Reservation& operator=(Reservation&& other) noexcept;
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    ~Reservation() { Release(); }
    // Reserves `bytes` more for the same request (RESOURCE_EXHAUSTED and no change when over
    // budget). On an empty Reservation (no budget) it does nothing and succeeds.
    absl::Status Add(int64_t bytes);
    int64_t bytes() const { return bytes_; }
    void Release();

   private:
    friend class ByteBudget;
    Reservation(ByteBudget* budget, int64_t bytes) : budget_(budget), bytes_(bytes) {}
    ByteBudget* budget_ = nullptr;
    int64_t bytes_ = 0;
  };

  // Reserves `bytes` (>= 0) or refuses them.
  absl::StatusOr<Reservation> Reserve(int64_t bytes);

  int64_t inflight_bytes() const { return inflight_.load(std::memory_order_relaxed); }
  int64_t max_inflight_bytes() const { return max_; }

 private:
  explicit ByteBudget(int64_t max) : max_(max) {}
  absl::Status Take(int64_t bytes);
  void Give(int64_t bytes) { inflight_.fetch_sub(bytes, std::memory_order_relaxed); }

  const int64_t max_;
  std::atomic<int64_t> inflight_{0};  // sum of live Reservations' bytes; never above max_
};

// A budget's Reserve when `budget` is set, otherwise an empty Reservation (no limit).
absl::StatusOr<ByteBudget::Reservation> ReserveIn(ByteBudget* budget, int64_t bytes);

}  // namespace rnnserve::server::limits
