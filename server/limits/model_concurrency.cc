#include "server/limits/model_concurrency.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/limits/caller_identity.h"

namespace rnnserve::server::limits {

absl::StatusOr<std::unique_ptr<ModelConcurrency>> ModelConcurrency::Create(const Options& options) {
  if (options.max_concurrent_per_model < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_concurrent_per_model must not be negative; was ", options.max_concurrent_per_model));
  }
  if (options.fair_floor_percent < 0 || options.fair_floor_percent > 100) {
    return absl::InvalidArgumentError(
        absl::StrCat("fair_floor_percent must be in [0, 100]; was ", options.fair_floor_percent));
  }
  return std::unique_ptr<ModelConcurrency>(new ModelConcurrency(options));
}

int ModelConcurrency::LimitFor(int instances) const {
  if (options_.max_concurrent_per_model > 0) return options_.max_concurrent_per_model;
  const int per_caller = kPerInstance * std::max(instances, 1);
  if (options_.fair_floor_percent >= 100) return per_caller;  // no reserve: first come
  return per_caller + static_cast<int>(ShareFloor(per_caller, options_.fair_floor_percent));
}

absl::StatusOr<ModelConcurrency::Slot> ModelConcurrency::Acquire(const void* key,
                                                                 const std::string& model,
                                                                 int instances,
                                                                 const std::string& caller) {
  const int64_t limit = LimitFor(instances);
  std::string share_key = ShareKey(caller);
  absl::MutexLock lock(&mu_);
  ShareLedger& running = running_[key];
  ShareAsk ask;
  const ShareVerdict v =
      running.Take(share_key, 1, limit, ShareFloor(limit, options_.fair_floor_percent), &ask);
  if (v != ShareVerdict::kGranted) {
    if (running.callers() == 0) running_.erase(key);
    return absl::ResourceExhaustedError(
        absl::StrCat("model '", model, "' is running ", ask.total,
                     " requests, its limit without dynamic "
                     "batching (--max-concurrent-per-model=",
                     options_.max_concurrent_per_model,
                     options_.max_concurrent_per_model == 0
                         ? absl::StrCat(": ", kPerInstance,
                                        " per instance and the newcomers' reserve, ", limit, ")")
                         : ")",
                     v == ShareVerdict::kBoundFull ? "" : absl::StrCat("; ", ExplainShare(ask, v)),
                     "; retry later"));
  }
  return Slot(this, key, std::move(share_key));
}

void ModelConcurrency::Give(const void* key, const std::string& caller) {
  absl::MutexLock lock(&mu_);
  auto it = running_.find(key);
  if (it == running_.end()) return;
  it->second.Give(caller, 1);
  if (it->second.callers() == 0) running_.erase(it);
}

void ModelConcurrency::Slot::Release() {
  if (owner_ != nullptr) owner_->Give(key_, caller_);
  owner_ = nullptr;
  key_ = nullptr;
}

ModelConcurrency::Slot::Slot(Slot&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)),
      key_(std::exchange(other.key_, nullptr)),
      caller_(std::move(other.caller_)) {}

ModelConcurrency::Slot& ModelConcurrency::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    Release();
    owner_ = std::exchange(other.owner_, nullptr);
    key_ = std::exchange(other.key_, nullptr);
    caller_ = std::move(other.caller_);
  }
  return *this;
}

}  // namespace rnnserve::server::limits
