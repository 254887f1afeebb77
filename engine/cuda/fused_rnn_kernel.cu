// The persistent grid kernel of FusedRnn (fused_rnn.h), LSTM or GRU. Plain FP32: FMAs and
// precise expf / tanhf, as the CPU engine computes them.
//
// No grid barrier: h(t) is exchanged through global memory as tagged words
// (fused_rnn_exchange.cuh): one round trip through L2 a step instead of a grid-wide barrier
// followed by a second round trip for h.

#include "engine/cuda/fused_rnn_cell.cuh"
#include "engine/cuda/fused_rnn_exchange.cuh"
#include "engine/cuda/fused_rnn_kernel.h"
#include "engine/cuda/launch.cuh"

namespace rnnserve::engine::cuda {
namespace {

// gs[b][r] = R's row r of this block . h(t-1)[b], for every b < B and r < rows: each warp takes
// groups of 4 rows of one sequence, its lanes the columns 4*lane, 4*lane + 128, ... (16-byte
// reads of Rs and hs, conflict-free), and sums each row's partial sums across the warp.
__device__ __forceinline__ void DotRows4(const float* Rs, const float* hs, float* gs, int B,
                                         int rows, int H) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const int groups = (rows + 3) / 4, H4 = H / 4;
  for (int d = warp; d < B * groups; d += warps) {
    const int b = d / groups, r0 = (d % groups) * 4;
    const float4* h4 = reinterpret_cast<const float4*>(hs + b * H);
    const float4* w4[4];
    bool on[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      on[q] = r0 + q < rows;
      w4[q] = reinterpret_cast<const float4*>(Rs + (on[q] ? r0 + q : r0) * H);
    }
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 2
    for (int k = lane; k < H4; k += 32) {
      const float4 hv = h4[k];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const float4 w = w4[q][k];
        acc[q] = fmaf(w.x, hv.x, acc[q]);
        acc[q] = fmaf(w.y, hv.y, acc[q]);
        acc[q] = fmaf(w.z, hv.z, acc[q]);
        acc[q] = fmaf(w.w, hv.w, acc[q]);
      }
    }
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      for (int off = 16; off > 0; off >>= 1) acc[q] += __shfl_down_sync(0xffffffffu, acc[q], off);
    }
    if (lane == 0) {
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        if (on[q]) gs[b * rows + r0 + q] = acc[q];
      }
    }
  }
}

// The same for widths that are not a multiple of 4: one warp a dot product.
__device__ __forceinline__ void DotRows1(const float* Rs, const float* hs, float* gs, int B,
                                         int rows, int H) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  for (int d = warp; d < B * rows; d += warps) {
    const int b = d / rows, r = d % rows;
    const float* row = Rs + r * H;
    const float* h = hs + b * H;
    float acc = 0.0f;
    for (int k = lane; k < H; k += 32) acc = fmaf(row[k], h[k], acc);
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (lane == 0) gs[b * rows + r] = acc;
  }
}

// G gates a unit. Shared memory: Rs [G*U][H] (row g*U+u is R's row g*H + k*U + u), hs [B][H]
// (h(t-1) of every unit), gs [B][G*U]. Each thread keeps up to kFusedGridCells (unit, sequence)
// cells in registers (FusedCell): cell r is i = tid + r * blockDim.x < B*U.
template <FusedRnnCell kCell, bool kVec4>
__global__ void __launch_bounds__(kFusedGridThreads, 1) FusedRnnKernel(FusedRnnArgs a) {
  constexpr int G = kFusedGates<kCell>;
  extern __shared__ float4 smem4[];
  const int H = a.H, U = a.U, B = a.B, tid = threadIdx.x;
  const int j0 = blockIdx.x * U;
  float* Rs = reinterpret_cast<float*>(smem4);
  float* hs = Rs + G * U * H;
  float* gs = hs + B * H;
  for (int i = tid; i < G * U * H; i += blockDim.x) {
    const int row = i / H, col = i % H;
    const int g = row / U, u = row % U;
    Rs[i] = a.R[(static_cast<int64_t>(g) * H + j0 + u) * H + col];
  }
  // Every thread reads the tags' base: it changes only after every block has left.
  const unsigned base = __ldcg(&a.sync->base);
  FusedCell<kCell> cells[kFusedGridCells];
#pragma unroll
  for (int r = 0; r < kFusedGridCells; ++r) {
    const int i = tid + r * blockDim.x;
    if (i < B * U) cells[r].Start(a, i / U, j0 + i % U);
  }
  __syncthreads();
  // Step s reads the words of parity s % 2 tagged base + s + 1 (h(-1) for s = 0) and writes
  // those of the other parity tagged base + s + 2.
#pragma unroll
  for (int r = 0; r < kFusedGridCells; ++r) {
    const int i = tid + r * blockDim.x;
    if (i < B * U) StoreFusedWord(a.xchg + (i / U) * H + j0 + i % U, cells[r].h, base + 1);
  }
  const int BH = B * H, stride = a.xchg_stride;
  for (int s = 0; s < a.steps; ++s) {
    const FusedWord* in = a.xchg + (s & 1) * stride;
    FusedWord* out = a.xchg + ((s + 1) & 1) * stride;
    const unsigned want = base + s + 1;
    GatherFusedWords(in, hs, BH, want);
    __syncthreads();
    if constexpr (kVec4) {
      DotRows4(Rs, hs, gs, B, G * U, H);
    } else {
      DotRows1(Rs, hs, gs, B, G * U, H);
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kFusedGridCells; ++r) {
      const int i = tid + r * blockDim.x;
      if (i >= B * U) break;
      const int b = i / U, u = i % U, j = j0 + u;
      FusedCell<kCell>& cell = cells[r];
      if (s < cell.len) {
        float g[G];
#pragma unroll
        for (int q = 0; q < G; ++q) g[q] = gs[b * G * U + q * U + u];
        cell.h = FusedCellStep<kCell>(cell.x, g, cell.h, cell.c, cell.bRn);
      }
      StoreFusedWord(out + b * H + j, cell.h, want + 1);
      cell.Emit(a, b, j, s);
    }
  }
#pragma unroll
  for (int r = 0; r < kFusedGridCells; ++r) {
    const int i = tid + r * blockDim.x;
    if (i >= B * U) break;
    cells[r].Finish(a, i / U, j0 + i % U);
  }
  LeaveFusedExchange(a.sync, base, a.steps);
}

using Kernel = void (*)(FusedRnnArgs);

Kernel KernelFor(FusedRnnCell cell, int H) {
  const bool vec4 = H % 4 == 0;
  if (cell == FusedRnnCell::kLstm) {
    return vec4 ? FusedRnnKernel<FusedRnnCell::kLstm, true>
                : FusedRnnKernel<FusedRnnCell::kLstm, false>;
  }
  return vec4 ? FusedRnnKernel<FusedRnnCell::kGru, true>
              : FusedRnnKernel<FusedRnnCell::kGru, false>;
}

}  // namespace

cudaError_t ConfigureFusedRnnKernel(FusedRnnCell cell, int H, size_t smem) {
  return RaiseDynamicSmemLimit(KernelFor(cell, H), smem);
}

cudaError_t MaxFusedRnnBlocksPerSm(FusedRnnCell cell, int H, size_t smem, int* blocks) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, KernelFor(cell, H),
                                                       kFusedGridThreads, smem);
}

cudaError_t LaunchFusedRnnKernel(const FusedRnnArgs& args, int blocks, size_t smem,
                                 cudaStream_t stream) {
  if (args.xchg == nullptr || args.sync == nullptr || args.xchg_stride < args.B * args.H) {
    return cudaErrorInvalidValue;
  }
  FusedRnnArgs copy = args;
  void* params[] = {&copy};
  return cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(KernelFor(args.cell, args.H)),
                                     dim3(blocks), dim3(kFusedGridThreads), params, smem, stream);
}

}  // namespace rnnserve::engine::cuda
