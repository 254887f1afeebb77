// FusedRnn's register kernel (fused_rnn_kernel.h): the grid kernel with each block's rows of R
// in its threads' registers instead of shared memory, for the widths it is compiled for.
// Plain FP32: FMAs and precise expf / tanhf, as the other fused kernels.
//
// Block k has U warps, warp w owns hidden unit j = k*U + w and keeps its G rows of R in
// registers: lane l holds columns 4l .. 4l+3 of every 128, as float4s. A step: all threads
// gather h(t-1) of every sequence into shared memory (tagged words, fused_rnn_exchange.cuh;
// two buffers by step parity, so that one block barrier a step suffices); each warp computes
// its unit's G dot products for each sequence b (16-byte reads of h, FMAs, a butterfly sum
// across the warp) and lane b applies the cell to sequence b and stores its h(t). No shared
// memory round trip of the gates and no second barrier: the warp that sums a unit's gates
// applies its cell.

#include "engine/cuda/fused_rnn_cell.cuh"
#include "engine/cuda/fused_rnn_exchange.cuh"
#include "engine/cuda/fused_rnn_kernel.h"
#include "engine/cuda/launch.cuh"

namespace rnnserve::engine::cuda {
namespace {

template <FusedRnnCell kCell, int kH>
__global__ void __launch_bounds__(kFusedRegMaxThreads, 1) FusedRnnRegKernel(FusedRnnArgs a) {
  constexpr int G = kFusedGates<kCell>;
  constexpr int kI = kH / 128;  // float4s of a row a lane keeps
  static_assert(kH % 128 == 0);
  extern __shared__ float4 smem4[];
  __shared__ unsigned base_shared;
  float* hbufs = reinterpret_cast<float*>(smem4);  // [2][B][kH]
  const int B = a.B, lane = threadIdx.x % 32;
  const int j = blockIdx.x * a.U + threadIdx.x / 32;
  float4 w[G][kI];
#pragma unroll
  for (int q = 0; q < G; ++q) {
    const float4* row =
        reinterpret_cast<const float4*>(a.R + (static_cast<int64_t>(q) * kH + j) * kH);
#pragma unroll
    for (int i = 0; i < kI; ++i) w[q][i] = __ldg(row + lane + 32 * i);
  }
  if (threadIdx.x == 0) base_shared = __ldcg(&a.sync->base);
  // Lane b < B keeps sequence b's cell of unit j.
  const bool mine = lane < B;
  float h = 0.0f, c = 0.0f, bRn = 0.0f, x[G];
  int len = 0;
#pragma unroll
  for (int q = 0; q < G; ++q) x[q] = 0.0f;
  if (mine) {
    len = a.lengths[lane];
    h = a.h0 ? a.h0[lane * kH + j] : 0.0f;
    c = a.c0 ? a.c0[lane * kH + j] : 0.0f;
    if constexpr (kCell == FusedRnnCell::kGru) bRn = a.bRn[j];
    const float* xp = a.xproj + static_cast<int64_t>(lane) * a.T * G * kH + j;  // step 0
#pragma unroll
    for (int q = 0; q < G; ++q) x[q] = xp[q * kH];
  }
  __syncthreads();
  const unsigned base = base_shared;
  if (mine) StoreFusedWord(a.xchg + lane * kH + j, h, base + 1);
  const int BH = B * kH, stride = a.xchg_stride;
  for (int s = 0; s < a.steps; ++s) {
    const FusedWord* in = a.xchg + (s & 1) * stride;
    FusedWord* out = a.xchg + ((s + 1) & 1) * stride;
    const unsigned want = base + s + 1;
    float* hs = hbufs + (s & 1) * BH;
    GatherFusedWords(in, hs, BH, want);
    __syncthreads();
    float gates[G];
#pragma unroll
    for (int q = 0; q < G; ++q) gates[q] = 0.0f;
    for (int b = 0; b < B; ++b) {
      const float4* h4 = reinterpret_cast<const float4*>(hs + b * kH) + lane;
      float acc[G];
#pragma unroll
      for (int q = 0; q < G; ++q) acc[q] = 0.0f;
#pragma unroll
      for (int i = 0; i < kI; ++i) {
        const float4 hv = h4[32 * i];
#pragma unroll
        for (int q = 0; q < G; ++q) {
          acc[q] = fmaf(w[q][i].x, hv.x, acc[q]);
          acc[q] = fmaf(w[q][i].y, hv.y, acc[q]);
          acc[q] = fmaf(w[q][i].z, hv.z, acc[q]);
          acc[q] = fmaf(w[q][i].w, hv.w, acc[q]);
        }
      }
#pragma unroll
      for (int q = 0; q < G; ++q) {
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) acc[q] += __shfl_xor_sync(0xffffffffu, acc[q], off);
        if (lane == b) gates[q] = acc[q];
      }
    }
    if (mine) {
      if (s < len) h = FusedCellStep<kCell>(x, gates, h, c, bRn);
      StoreFusedWord(out + lane * kH + j, h, want + 1);
      if (a.y) a.y[(static_cast<int64_t>(lane) * a.T + s) * kH + j] = s < len ? h : 0.0f;
      if (s + 1 < len) {
        const float* xp = a.xproj + (static_cast<int64_t>(lane) * a.T + s + 1) * G * kH + j;
#pragma unroll
        for (int q = 0; q < G; ++q) x[q] = xp[q * kH];
      }
    }
  }
  if (mine) {
    a.hy[lane * kH + j] = h;
    if (a.cy) a.cy[lane * kH + j] = c;
    if (a.y) {
      for (int t = a.steps; t < a.T; ++t)
        a.y[(static_cast<int64_t>(lane) * a.T + t) * kH + j] = 0.0f;
    }
  }
  LeaveFusedExchange(a.sync, base, a.steps);
}

using Kernel = void (*)(FusedRnnArgs);

template <FusedRnnCell kCell>
Kernel KernelOf(int H) {
  switch (H) {
    case 256:
      return FusedRnnRegKernel<kCell, 256>;
    case 512:
      return FusedRnnRegKernel<kCell, 512>;
    case 1024:
      return FusedRnnRegKernel<kCell, 1024>;
    default:
      return nullptr;
  }
}

Kernel KernelFor(FusedRnnCell cell, int H) {
  return cell == FusedRnnCell::kLstm ? KernelOf<FusedRnnCell::kLstm>(H)
                                     : KernelOf<FusedRnnCell::kGru>(H);
}

}  // namespace

bool FusedRnnRegCompiled(int H) { return KernelFor(FusedRnnCell::kLstm, H) != nullptr; }

cudaError_t ConfigureFusedRnnRegKernel(FusedRnnCell cell, int H, size_t smem) {
  Kernel k = KernelFor(cell, H);
  return k ? RaiseDynamicSmemLimit(k, smem) : cudaErrorInvalidValue;
}

cudaError_t MaxFusedRnnRegBlocksPerSm(FusedRnnCell cell, int H, int U, size_t smem, int* blocks) {
  Kernel k = KernelFor(cell, H);
  if (!k) return cudaErrorInvalidValue;
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, k, 32 * U, smem);
}

cudaError_t LaunchFusedRnnRegKernel(const FusedRnnArgs& args, int blocks, size_t smem,
                                    cudaStream_t stream) {
  Kernel k = KernelFor(args.cell, args.H);
  if (!k || args.xchg == nullptr || args.sync == nullptr || args.B > 32 ||
      args.xchg_stride < args.B * args.H || 32 * args.U > kFusedRegMaxThreads ||
      blocks * args.U != args.H) {
    return cudaErrorInvalidValue;
  }
  FusedRnnArgs copy = args;
  void* params[] = {&copy};
  return cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(k), dim3(blocks),
                                     dim3(32 * args.U), params, smem, stream);
}

}  // namespace rnnserve::engine::cuda
