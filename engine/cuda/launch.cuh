#pragma once

// Launch shapes shared by the GPU engine's elementwise kernels (.cu files only): 256-thread
// blocks, enough of them to cover n elements up to a cap, and grid-stride loops over the rest.

#include <cstddef>
#include <cstdint>
#include <mutex>

namespace rnnserve::engine::cuda {

inline constexpr int kThreads = 256;

inline unsigned Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8);
}

// Combines one value per thread of the block with `op`; every thread gets the result.
// blockDim.x must be a power of two and `scratch` hold blockDim.x values in shared memory.
template <typename T, typename Op>
__device__ T BlockReduce(T v, T* scratch, Op op) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) scratch[threadIdx.x] = op(scratch[threadIdx.x], scratch[threadIdx.x + s]);
    __syncthreads();
  }
  const T total = scratch[0];
  __syncthreads();
  return total;
}

// Raises `kernel`'s dynamic shared memory limit on the current device to at least `smem` bytes,
// never lowering it. The limit belongs to the function (per device), not to the layer that set
// it: every layer launching the same kernel shares it, so a layer that needs less must not take
// away what another layer's launches need.
template <typename Kernel>
cudaError_t RaiseDynamicSmemLimit(Kernel* kernel, size_t smem) {
  static std::mutex mu;  // the read and the write below, as one step
  std::lock_guard<std::mutex> lock(mu);
  cudaFuncAttributes attr;
  cudaError_t e = cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(kernel));
  if (e != cudaSuccess) return e;
  if (attr.maxDynamicSharedSizeBytes >= static_cast<int>(smem)) return cudaSuccess;
  return cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                              cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
}

}  // namespace rnnserve::engine::cuda

// for (i = this thread's first index; i < n; i += the grid's thread count)
#define RNNSERVE_GRID_LOOP(i, n)                                            \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); \
       i += int64_t{gridDim.x} * blockDim.x)
