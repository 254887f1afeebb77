// The thread-block-cluster kernel of FusedRnn (fused_rnn.h) on tensor cores, for R stored as
// bfloat16 or half: each step's recurrent product R . h(t-1) for every sequence of the batch
// (up to 8, the N of one mma.sync.m16n8k16) is a few warp-level MMAs with FP32 accumulation.
// The FMA kernel (fused_rnn_cluster.cuh) reads its weights once per sequence; here one MMA
// serves all 8 columns, so a batch of 8 costs about what one sequence does.
//
// h(t-1) stays FP32 in substance: it enters the MMA as two half-precision terms, hi = h rounded
// and lo = h - hi rounded, and R . hi + R . lo is accumulated in FP32, so the product carries
// about 16 (BF16) or 22 (FP16) bits of h; the only rounding of the layer's numbers is R's.
// The cell (h, c, the gates, precise expf / tanhf) is FP32 as in the FMA kernel.
//
// Layout, one cluster of kC blocks of 4G warps (G gates): block k owns units [k*U, (k+1)*U),
// U = H / kC in {16, 32}, and the G*U rows of R of their gates (local row g*U + u is R's row
// g*H + k*U + u), as G*U/16 M-tiles of 16 rows. Warp w takes the U/16 M-tiles of gate w / 4
// and a quarter of K (H/64 K-tiles of 16 columns, quarter w % 4); its A fragments (U*H/256
// registers a thread) stay in registers for all steps. h(t-1) lives in shared memory as
// B-fragment records: for K-tile kt and lane (n = lane / 4, t = lane % 4), 16 bytes
// {hi(k, k+1), hi(k+8, k+9), lo(k, k+1), lo(k+8, k+9)} with k = 16 kt + 2t, of sequence n
// (zeros for n >= B), so each K-tile is one 16-byte load a lane. Each step:
//   1. every warp runs its MMAs (hi and lo into separate accumulators) and stores its partial
//      sums, [quarter][n][row];
//   2. one thread per (b, u) sums the four quarters of its G gates and applies the cell;
//   3. the block's new h records (U/16 K-tiles, 512 bytes each) are stored into every block's
//      shared memory for the next step's parity, and the cluster synchronises.

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <array>
#include <cstdint>

#include "engine/cuda/fused_rnn_cell.cuh"
#include "engine/cuda/fused_rnn_cluster.cuh"
#include "engine/cuda/fused_rnn_kernel.h"

namespace rnnserve::engine::cuda {
namespace {

namespace cg = cooperative_groups;

// D += A . B, one m16n8k16 with FP32 accumulation.
template <FusedRnnWeights kW>
__device__ __forceinline__ void Mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  if constexpr (kW == FusedRnnWeights::kBf16) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// h as hi + lo, each rounded to nearest in the weights' half type (bits).
template <FusedRnnWeights kW>
__device__ __forceinline__ void Split(float h, uint16_t* hi, uint16_t* lo) {
  if constexpr (kW == FusedRnnWeights::kBf16) {
    const __nv_bfloat16 a = __float2bfloat16_rn(h);
    *hi = __bfloat16_as_ushort(a);
    *lo = __bfloat16_as_ushort(__float2bfloat16_rn(h - __bfloat162float(a)));
  } else {
    const __half a = __float2half_rn(h);
    *hi = __half_as_ushort(a);
    *lo = __half_as_ushort(__float2half_rn(h - __half2float(a)));
  }
}

// Where h of sequence n, column j goes in a K-tile's records (uint16 index from the tile's
// start): record lane n*4 + t, hi at 2*slot + half, lo 4 further.
__device__ __forceinline__ int RecordSlot(int n, int j) {
  const int kk = j % 16, t = (kk % 8) / 2, slot = kk / 8, half = kk % 2;
  return (n * 4 + t) * 8 + 2 * slot + half;
}

template <FusedRnnCell kCell, int kH, int kC, FusedRnnWeights kW>
struct MmaShape {
  static constexpr int kGates = kFusedGates<kCell>;
  static constexpr int kU = kH / kC;
  static constexpr int kRows = kGates * kU;
  static constexpr int kWarps = 4 * kGates;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kMTiles = kU / 16;       // a warp's M-tiles, all of one gate
  static constexpr int kKTiles = kH / 64;       // a warp's K-tiles, a quarter of K
  static constexpr int kRowStride = kRows + 4;  // partial sums [4][8][kRowStride]
  static_assert(kU == 16 || kU == 32);
  static_assert(kH % 64 == 0 && kClusterMaxBatch == 8 && kClusterMaxBatch * kU <= kThreads);
  // Shared memory: h records [2][kH/16][32] x 16 bytes, partial sums [4][8][kRowStride] floats,
  // the block's staged records [kU/16][32] x 16 bytes.
  static constexpr size_t kHsBytes = static_cast<size_t>(2) * (kH / 16) * 32 * 16;
  static constexpr size_t kPartBytes = sizeof(float) * 4 * 8 * kRowStride;
  static constexpr size_t kStageBytes = static_cast<size_t>(kU / 16) * 32 * 16;
  static constexpr size_t SmemBytes(int) { return kHsBytes + kPartBytes + kStageBytes; }
};

template <FusedRnnCell kCell, int kH, int kC, FusedRnnWeights kW>
__global__ void __launch_bounds__((MmaShape<kCell, kH, kC, kW>::kThreads), 1)
    FusedRnnClusterMmaKernel(FusedRnnArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  (void)a;
  __trap();
#else
  using S = MmaShape<kCell, kH, kC, kW>;
  constexpr int kG = S::kGates, kU = S::kU, kMT = S::kMTiles, kKT = S::kKTiles;
  constexpr int kTilesK = kH / 16;  // K-tiles of h
  cg::cluster_group cluster = cg::this_cluster();
  extern __shared__ float4 smem4[];
  uint4* hs = reinterpret_cast<uint4*>(smem4);  // [2][kTilesK][32]
  float* part = reinterpret_cast<float*>(reinterpret_cast<char*>(smem4) + S::kHsBytes);
  uint4* stage =
      reinterpret_cast<uint4*>(reinterpret_cast<char*>(smem4) + S::kHsBytes + S::kPartBytes);
  const int B = a.B;
  const int j0 = static_cast<int>(cluster.block_rank()) * kU;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int gid = lane / 4, tig = lane % 4;
  const int gate = warp / 4, quarter = warp % 4;

  // This warp's A fragments: M-tile m (rows gate*kU + 16m ..) x K-tile quarter*kKT + kt.
  uint32_t A[kMT][kKT][4];
#pragma unroll
  for (int m = 0; m < kMT; ++m) {
    const int64_t r0 = static_cast<int64_t>(gate) * kH + j0 + 16 * m + gid;
    const uint16_t* row0 = a.R16 + r0 * kH;
    const uint16_t* row8 = a.R16 + (r0 + 8) * kH;
#pragma unroll
    for (int kt = 0; kt < kKT; ++kt) {
      const int k = 16 * (quarter * kKT + kt) + 2 * tig;
      A[m][kt][0] = *reinterpret_cast<const uint32_t*>(row0 + k);
      A[m][kt][1] = *reinterpret_cast<const uint32_t*>(row8 + k);
      A[m][kt][2] = *reinterpret_cast<const uint32_t*>(row0 + k + 8);
      A[m][kt][3] = *reinterpret_cast<const uint32_t*>(row8 + k + 8);
    }
  }
  // h(-1) records in parity 0, zeros elsewhere (and for sequences past B, for good).
  for (int i = threadIdx.x; i < 2 * kTilesK * 32; i += blockDim.x) hs[i] = make_uint4(0, 0, 0, 0);
  for (int i = threadIdx.x; i < kU / 16 * 32; i += blockDim.x) stage[i] = make_uint4(0, 0, 0, 0);
  __syncthreads();
  if (a.h0) {
    uint16_t* h16 = reinterpret_cast<uint16_t*>(hs);
    for (int i = threadIdx.x; i < B * kH; i += blockDim.x) {
      const int n = i / kH, j = i % kH;
      uint16_t hi, lo;
      Split<kW>(a.h0[i], &hi, &lo);
      uint16_t* rec = h16 + (j / 16) * 32 * 8 + RecordSlot(n, j);
      rec[0] = hi;
      rec[4] = lo;
    }
  }

  // Thread i < B*U keeps the cell of sequence b = i / U, unit j0 + i % U.
  const int cell = threadIdx.x;
  const bool has_cell = cell < B * kU;
  const int cb = has_cell ? cell / kU : 0, cu = cell % kU, cj = j0 + cu;
  int len = 0;
  float c = 0.0f, h = 0.0f, bRn = 0.0f;
  float xin[kG] = {};
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
    const uint4* hin = hs + (s & 1) * kTilesK * 32;
    float dhi[kMT][4] = {}, dlo[kMT][4] = {};
#pragma unroll
    for (int kt = 0; kt < kKT; ++kt) {
      const uint4 r = hin[(quarter * kKT + kt) * 32 + lane];
#pragma unroll
      for (int m = 0; m < kMT; ++m) {
        Mma<kW>(dhi[m], A[m][kt], r.x, r.y);
        Mma<kW>(dlo[m], A[m][kt], r.z, r.w);
      }
    }
    // D fragment: rows gid, gid + 8; columns (sequences) 2*tig, 2*tig + 1.
    float* pq = part + quarter * 8 * S::kRowStride;
#pragma unroll
    for (int m = 0; m < kMT; ++m) {
      const int row = gate * kU + 16 * m + gid;
      pq[(2 * tig) * S::kRowStride + row] = dhi[m][0] + dlo[m][0];
      pq[(2 * tig + 1) * S::kRowStride + row] = dhi[m][1] + dlo[m][1];
      pq[(2 * tig) * S::kRowStride + row + 8] = dhi[m][2] + dlo[m][2];
      pq[(2 * tig + 1) * S::kRowStride + row + 8] = dhi[m][3] + dlo[m][3];
    }
    __syncthreads();
    if (has_cell) {
      if (s < len) {
        float g[kG];
#pragma unroll
        for (int q = 0; q < kG; ++q) {
          const float* p = part + cb * S::kRowStride + q * kU + cu;
          g[q] = ((p[0] + p[8 * S::kRowStride]) + p[16 * S::kRowStride]) + p[24 * S::kRowStride];
        }
        h = FusedCellStep<kCell>(xin, g, h, c, bRn);
        if (s + 1 < len) {
#pragma unroll
          for (int q = 0; q < kG; ++q) xin[q] = xp[(s + 1) * kG * kH + q * kH];
        }
      }
      uint16_t hi, lo;
      Split<kW>(h, &hi, &lo);
      uint16_t* rec = reinterpret_cast<uint16_t*>(stage) + (cu / 16) * 32 * 8 + RecordSlot(cb, cu);
      rec[0] = hi;
      rec[4] = lo;
      if (a.y) a.y[(static_cast<int64_t>(cb) * a.T + s) * kH + cj] = s < len ? h : 0.0f;
    }
    __syncthreads();
    // The block's kU/16 K-tiles of records, 16 bytes a store, to every block.
    uint4* hnext = hs + ((s + 1) & 1) * kTilesK * 32 + (j0 / 16) * 32;
    constexpr int kRecs = kU / 16 * 32;
    for (int i = threadIdx.x; i < kC * kRecs; i += blockDim.x) {
      const int rank = i / kRecs, r = i % kRecs;
      cluster.map_shared_rank(hnext, rank)[r] = stage[r];
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

template <FusedRnnCell kCell, int kH, int kC, FusedRnnWeights kW>
constexpr FusedRnnClusterVariant MakeMma() {
  using S = MmaShape<kCell, kH, kC, kW>;
  return {kCell,
          kH,
          kC,
          S::kThreads,
          kW,
          FusedRnnClusterMmaKernel<kCell, kH, kC, kW>,
          [](int B) { return S::SmemBytes(B); },
          /*mma=*/true};
}

constexpr FusedRnnCell kLstm = FusedRnnCell::kLstm, kGru = FusedRnnCell::kGru;

// A warp's A fragments take U*H/256 registers: 64 at H=512 over 16 blocks (U=32), 32 at
// H=256 over 8, 16 at H=256 over 16 and H=128 over 4, 8 at H=128 over 8.
template <FusedRnnWeights kW>
constexpr std::array<FusedRnnClusterVariant, 10> Shapes() {
  return {MakeMma<kLstm, 512, 16, kW>(), MakeMma<kLstm, 256, 16, kW>(),
          MakeMma<kLstm, 256, 8, kW>(),  MakeMma<kLstm, 128, 8, kW>(),
          MakeMma<kLstm, 128, 4, kW>(),  MakeMma<kGru, 512, 16, kW>(),
          MakeMma<kGru, 256, 16, kW>(),  MakeMma<kGru, 256, 8, kW>(),
          MakeMma<kGru, 128, 8, kW>(),   MakeMma<kGru, 128, 4, kW>()};
}

constexpr auto kBf16Shapes = Shapes<FusedRnnWeights::kBf16>();
constexpr auto kFp16Shapes = Shapes<FusedRnnWeights::kFp16>();

}  // namespace

const FusedRnnClusterVariant* FusedRnnClusterMmaVariants(FusedRnnWeights weights, int* count) {
  *count = 0;
  if (weights == FusedRnnWeights::kFp32) return nullptr;
  const auto& shapes = weights == FusedRnnWeights::kBf16 ? kBf16Shapes : kFp16Shapes;
  *count = static_cast<int>(shapes.size());
  return shapes.data();
}

}  // namespace rnnserve::engine::cuda
