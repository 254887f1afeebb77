#pragma once

// The thread-block-cluster recurrent kernel of FusedRnn (fused_rnn.h), LSTM or GRU, as a
// template over the cell, the width, the cluster size, the rows a warp keeps in registers and
// the storage of R (FusedRnnWeights). The instances live in fused_rnn_cluster_kernel.cu (FP32
// weights, and the launchers) and fused_rnn_cluster_half_kernel.cu (BF16 / FP16 weights).
// Arithmetic is plain FP32: FMAs and precise expf / tanhf, as the cooperative kernel and the
// CPU engine compute them; half weights are widened to FP32 as they are read (exactly: every
// bfloat16 and half value is a float).
//
// One cluster of kC blocks of 4G warps (G gates: 16 warps for the LSTM, 12 for the GRU); block
// k (its rank in the cluster) owns hidden units [k*U, (k+1)*U), U = H / kC, and the G*U rows of
// R [G*H, H] of their gates, U / 4 rows a warp. Warp w owns the block's local rows
// [w*kRowsPerWarp, (w+1)*kRowsPerWarp) (local row g*U + u is R's row g*H + k*U + u); lane l
// holds columns 128*c + 4*l .. +3 of each of them (a float4, or 8 bytes of half weights). The
// first kRegRows of a warp's rows live in registers for all steps, the rest in shared memory.
// Each step:
//   1. every warp computes its rows . h(t-1)[b] for each sequence b from h(t-1) in its own
//      block's shared memory, then reduces across lanes with a reduce-scatter;
//   2. one thread per (b, u) of the block applies the cell (h, the LSTM's c and the GRU's bRn
//      stay in its registers); its input projection for the next step is loaded one step ahead;
//   3. the block's new h slice is stored into every block's shared memory (distributed shared
//      memory), in the buffer of the next step's parity, and the cluster synchronises.

#include <cooperative_groups.h>

#include <cstdint>

#include "engine/cuda/fused_rnn_cell.cuh"
#include "engine/cuda/fused_rnn_kernel.h"

namespace rnnserve::engine::cuda {
namespace cluster_detail {

namespace cg = cooperative_groups;

// Four consecutive weights of a row as a lane holds them, by storage.
template <FusedRnnWeights kW>
struct WeightChunk {
  using Type = uint2;  // four bfloat16 or half values, the first in the low bits
  using Elem = uint16_t;
  static __device__ __forceinline__ const Elem* Base(const FusedRnnArgs& a) { return a.R16; }
};
template <>
struct WeightChunk<FusedRnnWeights::kFp32> {
  using Type = float4;
  using Elem = float;
  static __device__ __forceinline__ const Elem* Base(const FusedRnnArgs& a) { return a.R; }
};

__device__ __forceinline__ float Dot4(float4 r, float4 h, float acc) {
  acc = fmaf(r.x, h.x, acc);
  acc = fmaf(r.y, h.y, acc);
  acc = fmaf(r.z, h.z, acc);
  return fmaf(r.w, h.w, acc);
}

// Two half-precision values (low bits first) widened to FP32. The conversion is volatile
// assembly so that the compiler widens the weights where they are used, inside the step loop:
// hoisted out of it (they do not change from step to step) they would take twice the
// registers and spill.
template <FusedRnnWeights kW>
__device__ __forceinline__ float2 Widen2(uint32_t v) {
  float2 f;
  if constexpr (kW == FusedRnnWeights::kBf16) {
    asm volatile(
        "{\n\t"
        "shl.b32 %0, %2, 16;\n\t"
        "and.b32 %1, %2, 0xffff0000;\n\t}"
        : "=f"(f.x), "=f"(f.y)
        : "r"(v));
  } else {
    asm volatile(
        "{\n\t.reg .f16 lo, hi;\n\t"
        "mov.b32 {lo, hi}, %2;\n\t"
        "cvt.f32.f16 %0, lo;\n\t"
        "cvt.f32.f16 %1, hi;\n\t}"
        : "=f"(f.x), "=f"(f.y)
        : "r"(v));
  }
  return f;
}

template <FusedRnnWeights kW>
__device__ __forceinline__ float Dot4(uint2 r, float4 h, float acc) {
  const float2 a = Widen2<kW>(r.x), b = Widen2<kW>(r.y);
  return Dot4(make_float4(a.x, a.y, b.x, b.y), h, acc);
}

template <FusedRnnWeights kW, typename Chunk>
__device__ __forceinline__ float DotChunk(Chunk r, float4 h, float acc) {
  if constexpr (kW == FusedRnnWeights::kFp32) {
    return Dot4(r, h, acc);
  } else {
    return Dot4<kW>(r, h, acc);
  }
}

// Reduce-scatter of N partial sums (one per row) across the warp's 32 lanes: each level halves
// the values a lane holds, exchanging the other half with the lane kOff away, so N rows cost
// N - 1 + log2(32 / N) shuffles instead of 5N. Afterwards v[0] of a lane is the full sum of
// row RowOfLane<N>(lane).
template <int N, int kOff>
struct ReduceScatter {
  __device__ __forceinline__ static void Run(float* v, int lane) {
    const bool up = (lane & kOff) != 0;
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      const float send = up ? v[i] : v[i + N / 2];
      const float keep = up ? v[i + N / 2] : v[i];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, send, kOff);
    }
    ReduceScatter<N / 2, kOff / 2>::Run(v, lane);
  }
};

template <int kOff>
struct ReduceScatter<1, kOff> {
  __device__ __forceinline__ static void Run(float* v, int) {
#pragma unroll
    for (int off = kOff; off >= 1; off /= 2) v[0] += __shfl_xor_sync(0xffffffffu, v[0], off);
  }
};

template <int N>
__device__ __forceinline__ int RowOfLane(int lane) {
  int row = 0;
#pragma unroll
  for (int n = N, off = 16; n > 1; n /= 2, off /= 2) row += (lane & off) ? n / 2 : 0;
  return row;
}

template <FusedRnnCell kCell, int kH, int kC, int kRegRows, FusedRnnWeights kW>
struct ClusterShape {
  static constexpr int kGates = kFusedGates<kCell>;
  static constexpr int kU = kH / kC;
  static constexpr int kRows = kGates * kU;
  static constexpr int kWarps = 4 * kGates;  // so that a warp has U / 4 rows, whatever the cell
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kRowsPerWarp = kRows / kWarps;
  static constexpr int kSmemRows = kRowsPerWarp - kRegRows;  // per warp
  static constexpr int kChunks = kH / 128;                   // chunks of 4 per lane per row
  static constexpr size_t kWeightBytes = sizeof(typename WeightChunk<kW>::Elem);
  static_assert(kH % 128 == 0 && kH % kC == 0 && kU % 4 == 0 && kRows % kWarps == 0);
  static_assert(kRowsPerWarp >= 1 && kRowsPerWarp <= 32 &&
                (kRowsPerWarp & (kRowsPerWarp - 1)) == 0);
  static_assert(kRegRows >= 1 && kRegRows <= kRowsPerWarp);
  static_assert(kClusterMaxBatch * kU <= kThreads);

  // Shared memory: Rs [kWarps][kSmemRows][kH] weights, then floats hs [2][B][kH],
  // gs [B][kRows], hstage [B][kU]; each array a multiple of 16 bytes, so all are 16-byte aligned.
  static constexpr size_t SmemBytes(int B) {
    return kWeightBytes * kWarps * kSmemRows * kH +
           sizeof(float) * (static_cast<size_t>(2) * B * kH + static_cast<size_t>(B) * kRows +
                            static_cast<size_t>(B) * kU);
  }
};

template <FusedRnnCell kCell, int kH, int kC, int kRegRows, FusedRnnWeights kW>
__global__ void __launch_bounds__((ClusterShape<kCell, kH, kC, kRegRows, kW>::kThreads), 1)
    FusedRnnClusterKernel(FusedRnnArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  // Thread-block clusters need sm_90+. Builds for Ampere and Ada (sm_80..89) keep an empty body:
  // FusedRnn::FindCluster chooses this kernel only on a device with cudaDevAttrClusterLaunch.
  (void)a;
  __trap();
#else
  using S = ClusterShape<kCell, kH, kC, kRegRows, kW>;
  using Chunk = typename WeightChunk<kW>::Type;
  using Elem = typename WeightChunk<kW>::Elem;
  constexpr int kG = S::kGates, kU = S::kU, kRows = S::kRows, kRpw = S::kRowsPerWarp;
  constexpr int kChunks = S::kChunks, kSmemRows = S::kSmemRows;
  cg::cluster_group cluster = cg::this_cluster();
  extern __shared__ float4 smem4[];
  const Elem* R = WeightChunk<kW>::Base(a);
  const int B = a.B;
  const int j0 = static_cast<int>(cluster.block_rank()) * kU;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  Elem* Rs = reinterpret_cast<Elem*>(smem4);
  float* hs = reinterpret_cast<float*>(Rs + S::kWarps * kSmemRows * kH);
  float* gs = hs + 2 * B * kH;
  float* hstage = gs + B * kRows;
  auto global_row = [&](int local_row) {
    const int g = local_row / kU, u = local_row % kU;
    return static_cast<int64_t>(g) * kH + j0 + u;
  };

  // This warp's register rows of R.
  Chunk Rr[kRegRows][kChunks];
#pragma unroll
  for (int r = 0; r < kRegRows; ++r) {
    const Elem* row = R + global_row(warp * kRpw + r) * kH;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      Rr[r][c] = *reinterpret_cast<const Chunk*>(row + 128 * c + 4 * lane);
    }
  }
  // The shared-memory rows of every warp.
  if constexpr (kSmemRows > 0) {
    for (int i = threadIdx.x; i < S::kWarps * kSmemRows * kH / 4; i += blockDim.x) {
      const int srow = i / (kH / 4), col = 4 * (i % (kH / 4));
      const int w = srow / kSmemRows, r = kRegRows + srow % kSmemRows;
      reinterpret_cast<Chunk*>(Rs)[i] =
          *reinterpret_cast<const Chunk*>(R + global_row(w * kRpw + r) * kH + col);
    }
  }
  for (int i = threadIdx.x; i < B * kH; i += blockDim.x) hs[i] = a.h0 ? a.h0[i] : 0.0f;

  // Thread i < B*U keeps the cell of sequence b = i / U, unit j0 + i % U.
  const int cell = threadIdx.x;
  const bool has_cell = cell < B * kU;
  const int cb = has_cell ? cell / kU : 0, cu = cell % kU, cj = j0 + cu;
  int len = 0;
  float c = 0.0f, h = 0.0f, bRn = 0.0f;
  float xin[kG] = {};  // the gates' input projection, this step
  const float* xp = a.xproj + static_cast<int64_t>(cb) * a.T * kG * kH + cj;  // [T, G*H] of b
  if (has_cell) {
    len = a.lengths[cb];
    c = a.c0 ? a.c0[cb * kH + cj] : 0.0f;
    h = a.h0 ? a.h0[cb * kH + cj] : 0.0f;
    if constexpr (kCell == FusedRnnCell::kGru) bRn = a.bRn[cj];
#pragma unroll
    for (int g = 0; g < kG; ++g) xin[g] = xp[g * kH];
  }
  cluster.sync();  // every block runs and holds R and h(-1) before any remote store

  for (int s = 0; s < a.steps; ++s) {
    const float* hin = hs + (s & 1) * B * kH;
    for (int b = 0; b < B; ++b) {
      float4 hv[kChunks];
#pragma unroll
      for (int k = 0; k < kChunks; ++k) {
        hv[k] = *reinterpret_cast<const float4*>(hin + b * kH + 128 * k + 4 * lane);
      }
      float acc[kRpw];
#pragma unroll
      for (int r = 0; r < kRegRows; ++r) {
        acc[r] = 0.0f;
#pragma unroll
        for (int k = 0; k < kChunks; ++k) acc[r] = DotChunk<kW>(Rr[r][k], hv[k], acc[r]);
      }
#pragma unroll
      for (int r = kRegRows; r < kRpw; ++r) {
        const Elem* row = Rs + (warp * kSmemRows + (r - kRegRows)) * kH;
        acc[r] = 0.0f;
#pragma unroll
        for (int k = 0; k < kChunks; ++k) {
          acc[r] = DotChunk<kW>(*reinterpret_cast<const Chunk*>(row + 128 * k + 4 * lane), hv[k],
                                acc[r]);
        }
      }
      ReduceScatter<kRpw, 16>::Run(acc, lane);
      if ((lane & (32 / kRpw - 1)) == 0)
        gs[b * kRows + warp * kRpw + RowOfLane<kRpw>(lane)] = acc[0];
    }
    __syncthreads();
    if (has_cell) {
      if (s < len) {
        float g[kG];
#pragma unroll
        for (int q = 0; q < kG; ++q) g[q] = gs[cb * kRows + q * kU + cu];
        h = FusedCellStep<kCell>(xin, g, h, c, bRn);
        if (s + 1 < len) {
#pragma unroll
          for (int q = 0; q < kG; ++q) xin[q] = xp[(s + 1) * kG * kH + q * kH];
        }
      }
      hstage[cell] = h;
      if (a.y) a.y[(static_cast<int64_t>(cb) * a.T + s) * kH + cj] = s < len ? h : 0.0f;
    }
    __syncthreads();
    // 16-byte stores: a sequence's slice is kU floats at j0, both multiples of 4.
    float* hnext = hs + ((s + 1) & 1) * B * kH;
    constexpr int kU4 = kU / 4;
    for (int i = threadIdx.x; i < kC * B * kU4; i += blockDim.x) {
      const int rank = i / (B * kU4), bu = i % (B * kU4);
      float* dst = cluster.map_shared_rank(hnext, rank) + (bu / kU4) * kH + j0;
      reinterpret_cast<float4*>(dst)[bu % kU4] = reinterpret_cast<const float4*>(hstage)[bu];
    }
    cluster.sync();
  }
  if (has_cell) {
    a.hy[cb * kH + cj] = h;
    if (a.cy) a.cy[cb * kH + cj] = c;
    if (a.y) {
      for (int t = a.steps; t < a.T; ++t)
        a.y[(static_cast<int64_t>(cb) * a.T + t) * kH + cj] = 0.0f;
    }
  }
#endif
}

}  // namespace cluster_detail

// One compiled shape of the cluster kernel: registers hold what shared memory (~227 KiB a
// block) cannot.
struct FusedRnnClusterVariant {
  FusedRnnCell cell;
  int H, cluster, threads;
  FusedRnnWeights weights;
  void (*kernel)(FusedRnnArgs);
  size_t (*smem_bytes)(int B);
  bool mma = false;  // the tensor-core kernel (fused_rnn_cluster_mma_kernel.cu)
};

template <FusedRnnCell kCell, int kH, int kC, int kRegRows,
          FusedRnnWeights kW = FusedRnnWeights::kFp32>
constexpr FusedRnnClusterVariant MakeClusterVariant() {
  using S = cluster_detail::ClusterShape<kCell, kH, kC, kRegRows, kW>;
  return {kCell,
          kH,
          kC,
          S::kThreads,
          kW,
          cluster_detail::FusedRnnClusterKernel<kCell, kH, kC, kRegRows, kW>,
          [](int B) { return S::SmemBytes(B); }};
}

// The variants with R stored as `weights` (kBf16 or kFp16; none for kFp32), from
// fused_rnn_cluster_half_kernel.cu; *count is their number.
const FusedRnnClusterVariant* FusedRnnClusterHalfVariants(FusedRnnWeights weights, int* count);
// The tensor-core variants with R stored as `weights` (none for kFp32), from
// fused_rnn_cluster_mma_kernel.cu.
const FusedRnnClusterVariant* FusedRnnClusterMmaVariants(FusedRnnWeights weights, int* count);

}  // namespace rnnserve::engine::cuda
