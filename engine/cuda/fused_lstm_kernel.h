#pragma once

// Launchers of FusedLstm's recurrent kernels (plain C++ header): the cooperative grid kernel
// (fused_lstm_kernel.cu) and the thread-block-cluster kernel (fused_lstm_cluster_kernel.cu).

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rnnserve::engine::cuda {

struct FusedLstmArgs {
  const float* xproj = nullptr;      // [B, T, 4H] input projection with biases, gates i,f,g,o
  const float* R = nullptr;          // [4H, H]
  const int32_t* lengths = nullptr;  // [B], each in [1, T]
  const float* h0 = nullptr;         // [B, H] or null
  const float* c0 = nullptr;         // [B, H] or null
  float* hbuf = nullptr;             // [2, B, H] scratch (grid kernel only)
  float* y = nullptr;                // [B, T, H] or null; zero past each length
  float* hy = nullptr;               // [B, H]
  float* cy = nullptr;               // [B, H] or null
  int B = 0, T = 0, H = 0;
  int U = 0;      // hidden units per block (grid kernel only)
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

// The cluster kernel: one cluster of `cluster` blocks of kClusterThreads threads, R and h in
// the blocks' shared memory (and registers), h exchanged through distributed shared memory.
// It is compiled for a few (H, cluster) pairs only, batches of at most kClusterMaxBatch.
inline constexpr int kClusterThreads = 512;
inline constexpr int kClusterMaxBatch = 8;

// The cluster sizes compiled for hidden size H, largest first; empty when none.
std::vector<int> FusedLstmClusterSizes(int H);
// Dynamic shared memory per block for batches up to B, in bytes.
size_t FusedLstmClusterSmemBytes(int B, int H, int cluster);
// Sets the kernel's shared-memory limit and, past 8 blocks, allows the non-portable size.
cudaError_t ConfigureFusedLstmClusterKernel(int H, int cluster, size_t smem);
// How many such clusters the device can run at once (0: it cannot run one).
cudaError_t MaxActiveFusedLstmClusters(int H, int cluster, size_t smem, int* clusters);
cudaError_t LaunchFusedLstmClusterKernel(const FusedLstmArgs& args, int cluster, size_t smem,
                                         cudaStream_t stream);

// The one-block kernel for small H: the whole layer in one block with no grid barrier and no
// separate input projection. W^T [I][4H], R^T [H][4H] and the bias live in shared memory for
// all steps, h and c too; bias + x(t) . W[r] of `chunk` steps at a time is computed by all
// threads ahead of those steps, then each step adds h(t-1) . R[r] (FP32 FMAs) and costs two
// block barriers. Uses x (not FusedLstmArgs' xproj); hbuf and U are unused.
struct FusedLstmSmallArgs {
  FusedLstmArgs a;
  const float* x = nullptr;     // [B, T, I]
  const float* Wt = nullptr;    // [I, 4H]
  const float* Rt = nullptr;    // [H, 4H]
  const float* bias = nullptr;  // [4H]
  int I = 0;
  int chunk = 1;  // steps whose input projection is computed at once
};
// Shared memory of the one-block kernel for batches up to B, in bytes; its threads.
size_t FusedLstmSmallSmemBytes(int B, int I, int H, int chunk);
int FusedLstmSmallThreads(int B, int H);
cudaError_t ConfigureFusedLstmSmallKernel(size_t smem);
cudaError_t LaunchFusedLstmSmallKernel(const FusedLstmSmallArgs& args, size_t smem,
                                       cudaStream_t stream);

}  // namespace rnnserve::engine::cuda
