// The cooperative recurrent kernel of FusedLstm (fused_lstm.h). Plain FP32: FMAs and precise
// expf / tanhf, as the CPU engine computes them.

#include <cooperative_groups.h>

#include "engine/cuda/fused_lstm_kernel.h"
#include "engine/cuda/launch.cuh"

namespace rnnserve::engine::cuda {
namespace {

namespace cg = cooperative_groups;

__device__ __forceinline__ float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// Shared memory: Rs [4U][H] (row g*U+u is R's row g*H + k*U + u), hs [B][H], gs [B][4U],
// cs [B][U].
__global__ void FusedLstmKernel(FusedLstmArgs a) {
  cg::grid_group grid = cg::this_grid();
  extern __shared__ float smem[];
  const int H = a.H, U = a.U, B = a.B;
  const int j0 = blockIdx.x * U;
  float* Rs = smem;
  float* hs = Rs + 4 * U * H;
  float* gs = hs + B * H;
  float* cs = gs + B * 4 * U;
  for (int i = threadIdx.x; i < 4 * U * H; i += blockDim.x) {
    const int row = i / H, col = i % H;
    const int g = row / U, u = row % U;
    Rs[i] = a.R[(static_cast<int64_t>(g) * H + j0 + u) * H + col];
  }
  // h(-1) and c(-1) of this block's units.
  for (int i = threadIdx.x; i < B * U; i += blockDim.x) {
    const int b = i / U, j = j0 + i % U;
    cs[i] = a.c0 ? a.c0[b * H + j] : 0.0f;
    a.hbuf[b * H + j] = a.h0 ? a.h0[b * H + j] : 0.0f;
  }
  grid.sync();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  for (int s = 0; s < a.steps; ++s) {
    const float* hin = a.hbuf + (s % 2) * B * H;
    float* hout = a.hbuf + ((s + 1) % 2) * B * H;
    // h(t-1) from every block, read past L1 (other blocks wrote it before the barrier).
    for (int i = threadIdx.x; i < B * H; i += blockDim.x) hs[i] = __ldcg(hin + i);
    __syncthreads();
    // gs[b][r] = R's row r (of this block) . h(t-1)[b]: one warp per dot product.
    for (int d = warp; d < B * 4 * U; d += warps) {
      const int b = d / (4 * U), r = d % (4 * U);
      const float* row = Rs + r * H;
      const float* h = hs + b * H;
      float acc = 0.0f;
      for (int k = lane; k < H; k += 32) acc = fmaf(row[k], h[k], acc);
      for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
      if (lane == 0) gs[b * 4 * U + r] = acc;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < B * U; i += blockDim.x) {
      const int b = i / U, u = i % U, j = j0 + u;
      const int len = a.lengths[b];
      float h = hs[b * H + j];
      if (s < len) {
        const float* xp = a.xproj + (static_cast<int64_t>(b) * a.T + s) * 4 * H;
        const float* g = gs + b * 4 * U;
        const float ig = Sigmoid(xp[j] + g[u]);
        const float fg = Sigmoid(xp[H + j] + g[U + u]);
        const float cg_ = tanhf(xp[2 * H + j] + g[2 * U + u]);
        const float og = Sigmoid(xp[3 * H + j] + g[3 * U + u]);
        const float c = fg * cs[i] + ig * cg_;
        cs[i] = c;
        h = og * tanhf(c);
      }
      hout[b * H + j] = h;
      if (a.y) a.y[(static_cast<int64_t>(b) * a.T + s) * H + j] = s < len ? h : 0.0f;
    }
    grid.sync();
  }
  const float* hfin = a.hbuf + (a.steps % 2) * B * H;
  for (int i = threadIdx.x; i < B * U; i += blockDim.x) {
    const int b = i / U, j = j0 + i % U;
    a.hy[b * H + j] = __ldcg(hfin + b * H + j);
    if (a.cy) a.cy[b * H + j] = cs[i];
    if (a.y) {
      for (int t = a.steps; t < a.T; ++t) a.y[(static_cast<int64_t>(b) * a.T + t) * H + j] = 0.0f;
    }
  }
}

}  // namespace

cudaError_t ConfigureFusedLstmKernel(size_t smem) {
  return RaiseDynamicSmemLimit(FusedLstmKernel, smem);
}

cudaError_t MaxFusedLstmBlocksPerSm(int threads, size_t smem, int* blocks) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, FusedLstmKernel, threads, smem);
}

cudaError_t LaunchFusedLstmKernel(const FusedLstmArgs& args, int blocks, int threads, size_t smem,
                                  cudaStream_t stream) {
  FusedLstmArgs copy = args;
  void* params[] = {&copy};
  return cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(FusedLstmKernel), dim3(blocks),
                                     dim3(threads), params, smem, stream);
}

}  // namespace rnnserve::engine::cuda
