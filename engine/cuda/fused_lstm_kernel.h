#pragma once

// Launcher of FusedLstm's cooperative kernel (plain C++ header; the kernel is in
// fused_lstm_kernel.cu).

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace rnnserve::engine::cuda {

struct FusedLstmArgs {
  const float* xproj = nullptr;      // [B, T, 4H] input projection with biases, gates i,f,g,o
  const float* R = nullptr;          // [4H, H]
  const int32_t* lengths = nullptr;  // [B], each in [1, T]
  const float* h0 = nullptr;         // [B, H] or null
  const float* c0 = nullptr;         // [B, H] or null
  float* hbuf = nullptr;             // [2, B, H] scratch
  float* y = nullptr;                // [B, T, H] or null; zero past each length
  float* hy = nullptr;               // [B, H]
  float* cy = nullptr;               // [B, H] or null
  int B = 0, T = 0, H = 0;
  int U = 0;      // hidden units per block
  int steps = 0;  // the longest length
};

// Shared memory the kernel needs per block, in bytes.
inline size_t FusedLstmSmemBytes(int B, int H, int U) {
  return sizeof(float) * (static_cast<size_t>(4) * U * H + static_cast<size_t>(B) * H +
                          static_cast<size_t>(B) * 4 * U + static_cast<size_t>(B) * U);
}

cudaError_t ConfigureFusedLstmKernel(size_t smem);
cudaError_t MaxFusedLstmBlocksPerSm(int threads, size_t smem, int* blocks);
cudaError_t LaunchFusedLstmKernel(const FusedLstmArgs& args, int blocks, int threads, size_t smem,
                                  cudaStream_t stream);

}  // namespace rnnserve::engine::cuda
