#include "server/limits/byte_budget.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/limits/caller_identity.h"

namespace rnnserve::server::limits {

absl::StatusOr<std::unique_ptr<ByteBudget>> ByteBudget::Create(const Options& options) {
  if (options.max_inflight_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_inflight_bytes must be positive; was ", options.max_inflight_bytes));
  }
  if (options.fair_floor_percent < 0 || options.fair_floor_percent > 100) {
    return absl::InvalidArgumentError(
        absl::StrCat("fair_floor_percent must be in [0, 100]; was ", options.fair_floor_percent));
  }
  return std::unique_ptr<ByteBudget>(
      new ByteBudget(options.max_inflight_bytes,
                     ShareFloor(options.max_inflight_bytes, options.fair_floor_percent)));
}

absl::Status ByteBudget::Take(const std::string& key, int64_t bytes) {
  if (bytes < 0) return absl::InternalError(absl::StrCat("negative reservation: ", bytes));
  absl::MutexLock lock(&mu_);
  ShareAsk ask;
  const ShareVerdict v = ledger_.Take(key, bytes, max_, floor_, &ask);
  if (v == ShareVerdict::kGranted) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "request memory budget exceeded: this request needs ", bytes, " bytes, ", ask.total,
      " of the --max-inflight-bytes=", max_, " budget are held by requests in flight",
      v == ShareVerdict::kBoundFull ? "" : absl::StrCat("; ", ExplainShare(ask, v)),
      "; retry later or send smaller requests"));
}

void ByteBudget::Give(const std::string& key, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  ledger_.Give(key, bytes);
}

int64_t ByteBudget::inflight_bytes() const {
  absl::MutexLock lock(&mu_);
  return ledger_.total();
}

absl::StatusOr<ByteBudget::Reservation> ByteBudget::Reserve(const std::string& caller,
                                                            int64_t bytes) {
  std::string key = ShareKey(caller);
  if (absl::Status s = Take(key, bytes); !s.ok()) return s;
  return Reservation(this, std::move(key), bytes);
}

absl::Status ByteBudget::Reservation::Add(int64_t bytes) {
  if (budget_ == nullptr) return absl::OkStatus();
  if (absl::Status s = budget_->Take(caller_, bytes); !s.ok()) return s;
  bytes_ += bytes;
  return absl::OkStatus();
}

void ByteBudget::Reservation::Release() {
  if (budget_ != nullptr) budget_->Give(caller_, bytes_);
  budget_ = nullptr;
  bytes_ = 0;
}

ByteBudget::Reservation::Reservation(Reservation&& other) noexcept
    : budget_(std::exchange(other.budget_, nullptr)),
      caller_(std::move(other.caller_)),
      bytes_(std::exchange(other.bytes_, 0)) {}

ByteBudget::Reservation& ByteBudget::Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    Release();
    budget_ = std::exchange(other.budget_, nullptr);
    caller_ = std::move(other.caller_);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

absl::StatusOr<ByteBudget::Reservation> ReserveIn(ByteBudget* budget, const std::string& caller,
                                                  int64_t bytes) {
  if (budget == nullptr) return ByteBudget::Reservation();
  return budget->Reserve(caller, bytes);
}

}  // namespace rnnserve::server::limits
