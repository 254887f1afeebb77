#include "server/limits/model_concurrency.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rnnserve::server::limits {

absl::StatusOr<std::unique_ptr<ModelConcurrency>> ModelConcurrency::Create(const Options& options) {
  if (options.max_concurrent_per_model < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_concurrent_per_model must not be negative; was ", options.max_concurrent_per_model));
  }
  return std::unique_ptr<ModelConcurrency>(new ModelConcurrency(options));
}

int ModelConcurrency::LimitFor(int instances) const {
  if (options_.max_concurrent_per_model > 0) return options_.max_concurrent_per_model;
  return kPerInstance * std::max(instances, 1);
}

absl::StatusOr<ModelConcurrency::Slot> ModelConcurrency::Acquire(const void* key,
                                                                 const std::string& model,
                                                                 int instances) {
  const int limit = LimitFor(instances);
  absl::MutexLock lock(&mu_);
  int& running = running_[key];
  if (running >= limit) {
    return absl::ResourceExhaustedError(
        absl::StrCat("model '", model, "' is running ", running,
                     " requests, its limit without dynamic "
                     "batching (--max-concurrent-per-model=",
                     options_.max_concurrent_per_model,
                     options_.max_concurrent_per_model == 0
                         ? absl::StrCat(": ", kPerInstance, " per instance, ", limit, ")")
                         : ")",
                     "; retry later"));
  }
  ++running;
  return Slot(this, key);
}

void ModelConcurrency::Give(const void* key) {
  absl::MutexLock lock(&mu_);
  auto it = running_.find(key);
  if (it != running_.end() && --it->second <= 0) running_.erase(it);
}

void ModelConcurrency::Slot::Release() {
  if (owner_ != nullptr) owner_->Give(key_);
  owner_ = nullptr;
  key_ = nullptr;
}

ModelConcurrency::Slot::Slot(Slot&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), key_(std::exchange(other.key_, nullptr)) {}

ModelConcurrency::Slot& ModelConcurrency::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    Release();
    owner_ = std::exchange(other.owner_, nullptr);
    key_ = std::exchange(other.key_, nullptr);
  }
  return *this;
}

}  // namespace rnnserve::server::limits
