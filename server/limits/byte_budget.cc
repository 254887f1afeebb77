#include "server/limits/byte_budget.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace rnnserve::server::limits {

absl::StatusOr<std::unique_ptr<ByteBudget>> ByteBudget::Create(const Options& options) {
  if (options.max_inflight_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_inflight_bytes must be positive; was ", options.max_inflight_bytes));
  }
  return std::unique_ptr<ByteBudget>(new ByteBudget(options.max_inflight_bytes));
}

absl::Status ByteBudget::Take(int64_t bytes) {
  if (bytes < 0) return absl::InternalError(absl::StrCat("negative reservation: ", bytes));
  int64_t now = inflight_.load(std::memory_order_relaxed);
  do {
    if (bytes > max_ - now) {
      return absl::ResourceExhaustedError(
          absl::StrCat("request memory budget exceeded: this request needs ", bytes, " bytes, ",
                       now, " of the --max-inflight-bytes=", max_,
                       " budget are held by requests in flight; retry "
                       "later or send smaller requests"));
    }
  } while (!inflight_.compare_exchange_weak(now, now + bytes, std::memory_order_relaxed));
  return absl::OkStatus();
}

absl::StatusOr<ByteBudget::Reservation> ByteBudget::Reserve(int64_t bytes) {
  if (absl::Status s = Take(bytes); !s.ok()) return s;
  return Reservation(this, bytes);
}

absl::Status ByteBudget::Reservation::Add(int64_t bytes) {
  if (budget_ == nullptr) return absl::OkStatus();
  if (absl::Status s = budget_->Take(bytes); !s.ok()) return s;
  bytes_ += bytes;
  return absl::OkStatus();
}

void ByteBudget::Reservation::Release() {
  if (budget_ != nullptr) budget_->Give(bytes_);
  budget_ = nullptr;
  bytes_ = 0;
}

ByteBudget::Reservation::Reservation(Reservation&& other) noexcept
    : budget_(std::exchange(other.budget_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

ByteBudget::Reservation& ByteBudget::Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    Release();
    budget_ = std::exchange(other.budget_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

absl::StatusOr<ByteBudget::Reservation> ReserveIn(ByteBudget* budget, int64_t bytes) {
  if (budget == nullptr) return ByteBudget::Reservation();
  return budget->Reserve(bytes);
}

}  // namespace rnnserve::server::limits
