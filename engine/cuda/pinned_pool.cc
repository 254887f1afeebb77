#include "engine/cuda/pinned_pool.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace rnnserve::engine::cuda {
namespace {

// Blocks come in power-of-two sizes from 4 KiB, so a batch whose shape changes a little reuses
// the block of the last one.
size_t SizeClass(size_t bytes) {
  size_t c = 4096;
  while (c < bytes) c <<= 1;
  return c;
}

}  // namespace

std::shared_ptr<PinnedPool> PinnedPool::Create(size_t max_cached_bytes) {
  return std::shared_ptr<PinnedPool>(new PinnedPool(max_cached_bytes));
}

PinnedPool::~PinnedPool() {
  // Only free blocks are left: a tensor over a block holds the pool.
  for (const auto& [bytes, block] : free_) cudaFreeHost(block);
}

absl::StatusOr<Tensor> PinnedPool::NewTensor(DType dtype, Shape shape) {
  const int64_t n = NumElements(shape);
  const size_t bytes = SizeClass(static_cast<size_t>(std::max<int64_t>(n, 1)) *
                                 (dtype == DType::kFloat32 ? sizeof(float) : sizeof(int64_t)));
  void* block = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (auto it = free_.find(bytes); it != free_.end()) {
      block = it->second;
      free_.erase(it);
      cached_bytes_ -= bytes;
    }
  }
  if (block == nullptr) {
    const cudaError_t err = cudaHostAlloc(&block, bytes, cudaHostAllocPortable);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return absl::ResourceExhaustedError(absl::StrCat(
          "pinning ", bytes, " bytes of host memory failed: CUDA error ", cudaGetErrorName(err)));
    }
    absl::MutexLock lock(&mu_);
    pinned_bytes_ += bytes;
  }
  // The deleter holds the pool, so a response tensor may outlive the model that made it.
  std::shared_ptr<void> owner(
      block, [pool = shared_from_this(), bytes](void* p) { pool->Return(p, bytes); });
  return Tensor::Wrap(dtype, std::move(shape), block, std::move(owner));
}

void PinnedPool::Return(void* block, size_t bytes) {
  {
    absl::MutexLock lock(&mu_);
    if (cached_bytes_ + bytes <= max_cached_bytes_) {
      free_.emplace(bytes, block);
      cached_bytes_ += bytes;
      return;
    }
    pinned_bytes_ -= bytes;
  }
  cudaFreeHost(block);
}

int64_t PinnedPool::pinned_bytes() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(pinned_bytes_);
}

int64_t PinnedPool::cached_bytes() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(cached_bytes_);
}

PinnedStaging::~PinnedStaging() {
  if (base_ != nullptr) cudaFreeHost(base_);
}

void PinnedStaging::Reset() { Reserve(std::min(std::max(wanted_, kInitialBytes), kMaxBytes)); }

void PinnedStaging::Reserve(size_t want) {
  if (want > capacity_) {
    if (base_ != nullptr) cudaFreeHost(base_);
    base_ = nullptr;
    capacity_ = 0;
    void* p = nullptr;
    if (cudaHostAlloc(&p, want, cudaHostAllocPortable) == cudaSuccess) {
      base_ = static_cast<char*>(p);
      capacity_ = want;
    } else {
      cudaGetLastError();
    }
  }
  used_ = 0;
  wanted_ = 0;
}

const void* PinnedStaging::Stage(const void* src, size_t bytes) {
  constexpr size_t kAlign = 256;
  auto aligned = [](size_t n) { return (n + kAlign - 1) / kAlign * kAlign; };
  wanted_ = aligned(wanted_) + bytes;  // what this Run would have needed, for the next Reset
  const size_t start = aligned(used_);
  if (base_ == nullptr || start + bytes > capacity_) return nullptr;
  std::memcpy(base_ + start, src, bytes);
  used_ = start + bytes;
  return base_ + start;
}

}  // namespace rnnserve::engine::cuda
