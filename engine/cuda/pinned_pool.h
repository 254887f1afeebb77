#pragma once

// Page-locked host memory for the GPU engine's inputs and outputs. A copy between the device
// and pageable memory goes through the driver's own staging buffers at a fraction of the PCIe
// bandwidth, and a fresh output vector of a large batch costs a page fault per 4 KiB; tensors
// over pinned blocks avoid both. Blocks are recycled: a tensor's block returns to the pool when
// the last tensor over it is destroyed (after the response is encoded), so steady-state
// batches neither allocate nor pin. Thread-safe; tensors may outlive the compiled model.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/tensor.h"

namespace rnnserve::engine::cuda {

class PinnedPool : public std::enable_shared_from_this<PinnedPool> {
 public:
  // Keeps at most `max_cached_bytes` of free blocks; a block returned past that is unpinned.
  static std::shared_ptr<PinnedPool> Create(size_t max_cached_bytes);
  ~PinnedPool();
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;

  // A tensor of this type and shape over a pinned block (contents undefined). Fails with
  // RESOURCE_EXHAUSTED when the host cannot pin that much.
  absl::StatusOr<Tensor> NewTensor(DType dtype, Shape shape);

  // Blocks this pool has pinned (in use and free) and the bytes of the free ones.
  int64_t pinned_bytes() const;
  int64_t cached_bytes() const;

 private:
  explicit PinnedPool(size_t max_cached_bytes) : max_cached_bytes_(max_cached_bytes) {}
  void Return(void* block, size_t bytes);

  const size_t max_cached_bytes_;
  mutable absl::Mutex mu_;
  std::multimap<size_t, void*> free_ ABSL_GUARDED_BY(mu_);  // by size class
  size_t cached_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  size_t pinned_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

// Page-locked scratch for one Run's small uploads (lengths, step masks, inputs the caller gave
// in pageable memory): Stage copies the bytes in and returns where, so the copy to the device is
// an asynchronous DMA that needs no synchronisation of the stream first, as a pageable source
// does. Bump allocation, reset by Reset() once the previous Run's copies have completed; a Run
// that needed more than it had grows it at the next Reset. Not thread-safe (one per instance).
class PinnedStaging {
 public:
  PinnedStaging() = default;
  ~PinnedStaging();
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

  // Starts a Run; the caller guarantees the last Run's copies are done.
  void Reset();
  // `bytes` of `src` copied into the staging area; null when it is full (or cannot be pinned),
  // and the caller copies from `src` itself.
  const void* Stage(const void* src, size_t bytes);
  // Reset, holding at least `bytes` from now on (a captured graph's own area, sized before its
  // capture).
  void Reserve(size_t bytes);
  // Where a pointer Stage returned lies in the area, and the area itself.
  size_t OffsetOf(const void* staged) const {
    return static_cast<size_t>(static_cast<const char*>(staged) - base_);
  }
  char* base() const { return base_; }

  static constexpr size_t kInitialBytes = size_t{64} << 10;
  static constexpr size_t kMaxBytes = size_t{16} << 20;  // larger uploads go as they are

 private:
  char* base_ = nullptr;
  size_t capacity_ = 0, used_ = 0, wanted_ = 0;
};

}  // namespace rnnserve::engine::cuda
