// The cooperative recurrent kernel of FusedRnn (fused_rnn.h), LSTM or GRU. Plain FP32: FMAs and
// precise expf / tanhf, as the CPU engine computes them.

#include <cooperative_groups.h>

#include "engine/cuda/fused_rnn_cell.cuh"
#include "engine/cuda/fused_rnn_kernel.h"
#include "engine/cuda/launch.cuh"

namespace rnnserve::engine::cuda {
namespace {

namespace cg = cooperative_groups;

// G gates a unit. Shared memory: Rs [G*U][H] (row g*U+u is R's row g*H + k*U + u), hs [B][H],
// gs [B][G*U], cs [B][U] (the LSTM's cell states).
template <FusedRnnCell kCell>
__global__ void FusedRnnKernel(FusedRnnArgs a) {
  constexpr int G = kFusedGates<kCell>;
  cg::grid_group grid = cg::this_grid();
  extern __shared__ float smem[];
  const int H = a.H, U = a.U, B = a.B;
  const int j0 = blockIdx.x * U;
  float* Rs = smem;
  float* hs = Rs + G * U * H;
  float* gs = hs + B * H;
  float* cs = gs + B * G * U;
  for (int i = threadIdx.x; i < G * U * H; i += blockDim.x) {
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
    for (int d = warp; d < B * G * U; d += warps) {
      const int b = d / (G * U), r = d % (G * U);
      const float* row = Rs + r * H;
      const float* h = hs + b * H;
      float acc = 0.0f;
      for (int k = lane; k < H; k += 32) acc = fmaf(row[k], h[k], acc);
      for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
      if (lane == 0) gs[b * G * U + r] = acc;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < B * U; i += blockDim.x) {
      const int b = i / U, u = i % U, j = j0 + u;
      const int len = a.lengths[b];
      float h = hs[b * H + j];
      if (s < len) {
        const float* xp = a.xproj + (static_cast<int64_t>(b) * a.T + s) * G * H;
        float x[G], g[G];
#pragma unroll
        for (int q = 0; q < G; ++q) {
          x[q] = xp[q * H + j];
          g[q] = gs[b * G * U + q * U + u];
        }
        const float bRn = kCell == FusedRnnCell::kGru ? __ldg(a.bRn + j) : 0.0f;
        h = FusedCellStep<kCell>(x, g, h, cs[i], bRn);
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

void (*KernelFor(FusedRnnCell cell))(FusedRnnArgs) {
  return cell == FusedRnnCell::kLstm ? FusedRnnKernel<FusedRnnCell::kLstm>
                                     : FusedRnnKernel<FusedRnnCell::kGru>;
}

}  // namespace

cudaError_t ConfigureFusedRnnKernel(FusedRnnCell cell, size_t smem) {
  return RaiseDynamicSmemLimit(KernelFor(cell), smem);
}

cudaError_t MaxFusedRnnBlocksPerSm(FusedRnnCell cell, int threads, size_t smem, int* blocks) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, KernelFor(cell), threads, smem);
}

cudaError_t LaunchFusedRnnKernel(const FusedRnnArgs& args, int blocks, int threads, size_t smem,
                                 cudaStream_t stream) {
  FusedRnnArgs copy = args;
  void* params[] = {&copy};
  return cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(KernelFor(args.cell)),
                                     dim3(blocks), dim3(threads), params, smem, stream);
}

}  // namespace rnnserve::engine::cuda
