// The batch-tiled persistent kernel of FusedRnn (fused_rnn_batched_kernel.h), LSTM or GRU.
// FP32 FMAs (or, in the tensor-core tiles, TF32 products: three a product at FP32 accuracy,
// tf32_mma.cuh) and precise expf / tanhf, as the other fused kernels and the CPU engine.

#include <cooperative_groups.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "engine/cuda/fused_rnn_batched_kernel.h"
#include "engine/cuda/fused_rnn_cell.cuh"
#include "engine/cuda/launch.cuh"
#include "engine/cuda/tf32_mma.cuh"

namespace rnnserve::engine::cuda {
namespace {

namespace cg = cooperative_groups;

// 16 bytes global -> shared, cached in L2 only (.cg): other blocks wrote h(t-1) before the grid
// barrier, and a line of it left in this SM's L1 from two steps ago would be stale.
__device__ __forceinline__ void CpAsync16(float* dst, const float* src) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src) : "memory");
}

__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Waits until at most n of this thread's committed groups are pending (n < kBatchedMaxBufs).
__device__ __forceinline__ void CpAsyncWaitAtMost(int n) {
  static_assert(kBatchedMaxBufs == 8);
  switch (n) {
    case 0:
      CpAsyncWait<0>();
      break;
    case 1:
      CpAsyncWait<1>();
      break;
    case 2:
      CpAsyncWait<2>();
      break;
    case 3:
      CpAsyncWait<3>();
      break;
    case 4:
      CpAsyncWait<4>();
      break;
    case 5:
      CpAsyncWait<5>();
      break;
    case 6:
      CpAsyncWait<6>();
      break;
    default:
      CpAsyncWait<7>();
      break;
  }
}

// R's element i as FP32, whatever it is stored as (FusedRnnArgs::weights).
__device__ __forceinline__ float WeightOf(const FusedRnnArgs& a, int64_t i) {
  if (a.weights == FusedRnnWeights::kFp32) return a.R[i];
  const uint16_t v = a.R16[i];
  return a.weights == FusedRnnWeights::kBf16 ? __uint_as_float(uint32_t{v} << 16)
                                             : __half2float(__ushort_as_half(v));
}

template <int kA, int kB>
__device__ __forceinline__ void ZeroTiles(float (&t)[kA][kB][4]) {
#pragma unroll
  for (int a = 0; a < kA; ++a) {
#pragma unroll
    for (int b = 0; b < kB; ++b) {
#pragma unroll
      for (int q = 0; q < 4; ++q) t[a][b][q] = 0.0f;
    }
  }
}

// FusedBatchedSlots as a constant that device code may read.
template <FusedRnnCell kCell>
inline constexpr int kFusedBatchedSlots = FusedBatchedSlots(kCell);

template <FusedRnnCell kCell, int kTU, int kTB, int kMma>
__global__ void __launch_bounds__(kBatchedThreads, 1) FusedBatchedKernel(FusedBatchedArgs args) {
  constexpr int G = kFusedGates<kCell>;
  constexpr int kPanels = kTB / 4;  // float4s of sequences a tile reads per column
  // Tensor cores: M-tiles (16 rows) and N-tiles (8 sequences) of a warp's tile.
  constexpr int kMT = kMma ? kTU / 4 : 1, kNT = kMma ? kTB / 8 : 1;
  static_assert(kMma == 0 || (kMT >= 1 && kNT >= 1 && kMT * 4 == kTU && kNT * 8 == kTB));
  constexpr int kAccU = kMma ? 1 : kTU, kAccB = kMma ? 1 : kTB;  // FMA tiles' accumulators
  cg::grid_group grid = cg::this_grid();
  const FusedRnnArgs& a = args.a;
  const FusedBatchedPlan& p = args.plan;
  // Part (d, g) of the grid: direction d of args.dirs (its weights, columns of the input
  // projection and of y; the reverse direction runs each sequence from its last valid step) and
  // group g of args.groups, sequences [b0, b0 + B) of the batch (the last group may have fewer,
  // or none), with its own h exchange and states.
  const int per_part = gridDim.x / (args.dirs * args.groups), part = blockIdx.x / per_part;
  const int d = part / args.groups, group = part % args.groups;
  const int seqs = (a.B + args.groups - 1) / args.groups, b0 = group * seqs;
  const int H = a.H, B = max(0, min(seqs, a.B - b0)), U = p.U, Bp = p.Bp, BS = p.BS, KC = p.KC;
  const bool reverse = d == 1;
  const int XS = args.dirs * G * H, YS = args.dirs * H;    // row strides of xproj and y
  const int64_t r0 = static_cast<int64_t>(d) * G * H * H;  // this direction's R
  const float* xproj = a.xproj + static_cast<int64_t>(b0) * a.T * XS + d * G * H;
  const int* lengths = a.lengths + b0;
  // hT by step parity, and for GRU reset_after=False r * h(t-1) too.
  constexpr int kSlots = kFusedBatchedSlots<kCell>;
  float* hbuf = a.hbuf + static_cast<int64_t>(part) * kSlots * H * Bp;
  float* y = a.y ? a.y + static_cast<int64_t>(b0) * a.T * YS + d * H : nullptr;
  // Offset of this part's states in h0, c0, hy, cy [dirs][B][H].
  const int64_t state = (static_cast<int64_t>(d) * a.B + b0) * H;
  const int NB4 = Bp / 4;         // float4s of a column of hT
  const int PW4 = NB4 / kPanels;  // float4s of a panel; tile bg reads float4 bg of each
  const int j0 = (blockIdx.x % per_part) * U;
  const int tid = threadIdx.x;
  extern __shared__ float4 smem4[];
  // float4s a row of Ws; quads of gate rows; float4s a row of the partial sums
  const int WS = p.WS, Q = p.Q, RQ = p.RQ;
  float* Ws = reinterpret_cast<float*>(smem4);  // [H][WS][4], quads [0, Q) of each row used
  float* bs = Ws + 4 * H * WS;                  // [4][U] the units' biases
  float* hb = bs + 4 * U;                       // [bufs][KC][BS]
  float* red = hb;                              // [KS][Bp][RQ][4], once the chunks are done
  const float4* Ws4 = reinterpret_cast<const float4*>(Ws);
  float4* red4 = reinterpret_cast<float4*>(red);

  // R's rows of this block's units, read along k (coalesced): gate row e = u*G + q of the block
  // is R's row q*H + j0+u, Ws[k][e / 4][e % 4] = R[q*H + j0+u][k]; zero past the G*U rows.
  // Half weights are widened here, once: every sum stays FP32.
  for (int i = tid; i < 4 * Q * H; i += blockDim.x) {
    const int k = i % H, e = i / H, u = e / G, q = e % G;
    Ws[(k * WS + e / 4) * 4 + e % 4] =
        e < G * U ? WeightOf(a, r0 + (static_cast<int64_t>(q) * H + j0 + u) * H + k) : 0.0f;
  }
  // The biases, added to xproj's (unbiased) values in the cell: from shared memory, since the
  // grid barrier's acquire leaves L1 cold every step.
  for (int i = tid; i < G * U; i += blockDim.x)
    bs[i] = a.bias[d * G * H + (i / U) * H + j0 + i % U];

  // This thread's cells: cell r is i = tid + r * blockDim.x < U * B, unit u = i % U, sequence
  // b = i / U. h, c, the input projection of this step and of the next (xn, loaded at the
  // start of a step so that its latency passes under the step's GEMM rather than in the grid
  // barrier, whose fence waits for it) and the length stay in registers.
  float h[kBatchedMaxCells], c[kBatchedMaxCells], x[kBatchedMaxCells][G], xn[kBatchedMaxCells][G];
  int len[kBatchedMaxCells];
  float bRn[kBatchedMaxCells];
#pragma unroll
  for (int r = 0; r < kBatchedMaxCells; ++r) {
    const int i = tid + r * blockDim.x;
    h[r] = c[r] = 0.0f;
    len[r] = 0;
    bRn[r] = 0.0f;
#pragma unroll
    for (int q = 0; q < G; ++q) x[r][q] = xn[r][q] = 0.0f;
    if (i < U * B) {
      const int u = i % U, b = i / U, j = j0 + u;
      len[r] = lengths[b];
      h[r] = a.h0 ? a.h0[state + b * H + j] : 0.0f;
      c[r] = a.c0 ? a.c0[state + b * H + j] : 0.0f;
      if constexpr (kCell == FusedRnnCell::kGru) bRn[r] = a.bRn[d * H + j];
      const int t0 = reverse ? len[r] - 1 : 0;  // step 0's time
      const float* xp = xproj + (static_cast<int64_t>(b) * a.T + t0) * XS + j;
#pragma unroll
      for (int q = 0; q < G; ++q) x[r][q] = xp[q * H];
      hbuf[j * Bp + b] = h[r];
    }
  }
  // The padding sequences of every buffer are zero.
  for (int i = tid; i < U * (Bp - B); i += blockDim.x) {
    const int j = j0 + i % U, b = B + i / U;
#pragma unroll
    for (int slot = 0; slot < kSlots; ++slot) hbuf[slot * H * Bp + j * Bp + b] = 0.0f;
  }
  grid.sync();

  // The GEMM's threads: thread t < tiles * KS has tile (tu, bg): units tu*kTU .. +kTU-1 and,
  // of each panel m of 4*PW4 sequences, sequences m*4*PW4 + bg*4 .. +3; and the columns ks,
  // ks + KS, ... of each chunk (interleaved, so that the lanes of a warp that differ in ks
  // read neighbouring rows of the chunk and of Ws: different banks).
  // Tensor cores: warp w has tile w % tiles and columns part w / tiles; its rows [e0, e0 + 4 kTU)
  // and sequences [n0, n0 + kTB); lane (g, c) = (lane / 4, lane % 4) of the fragments.
  const int gemm_threads = kMma ? kBatchedThreads : p.tiles * p.KS;
  const bool gemm = tid < gemm_threads;
  const int ks = kMma ? tid / 32 / p.tiles : tid / p.tiles;
  const int tile = kMma ? tid / 32 % p.tiles : tid % p.tiles;
  const int tu = kMma ? tile / (Bp / kTB) : tile / PW4, tbg = kMma ? tile % (Bp / kTB) : tile % PW4;
  const int lg = (tid % 32) / 4, lc = tid % 4;
  const int e0 = tu * 4 * kTU, n0 = tbg * kTB;
  const int row4 = Bp / 4, chunk4 = KC * row4;  // 16-byte copies a column, a chunk

  // Chunk cc of src [H][Bp] into chunk buffer buf, rows of BS floats.
  auto copy_chunk = [&](const float* src, int buf, int cc) {
    for (int i = tid; i < chunk4; i += blockDim.x) {
      const int k = i / row4, c4 = i - k * row4;
      CpAsync16(hb + (buf * KC + k) * BS + 4 * c4, src + (cc * KC + k) * Bp + 4 * c4);
    }
    CpAsyncCommit();
  };
  // Every gate row of the block times src [H][Bp] (h(t-1), or r * h(t-1)), left as the KS
  // partial sums in red; `before` runs between issuing the first chunks' copies and the GEMM.
  auto gemm_rows = [&](const float* src, auto before) {
    for (int cc = 0; cc < min(p.bufs, p.chunks); ++cc) copy_chunk(src, cc, cc);
    before();
    [[maybe_unused]] float acc[kAccU][kAccB][4];  // [quad][sequence][row of the quad]
    // Tensor cores: [M-tile][N-tile][fragment], hi.hi and (kMma 3) hi.lo + lo.hi.
    [[maybe_unused]] float big[kMT][kNT][4], small[kMT][kNT][4];
    if constexpr (kMma) {
      ZeroTiles(big);
      ZeroTiles(small);
    } else {
      ZeroTiles(acc);
    }
    for (int cc = 0; cc < p.chunks; ++cc) {
      CpAsyncWaitAtMost(min(p.bufs - 1, p.chunks - 1 - cc));
      __syncthreads();
      const int buf = cc % p.bufs;
      if constexpr (kMma) {
        // Columns kk .. kk + 7 of the chunk a k-step; A (16 x 8, rows x columns) from Ws, B
        // (8 x 8, columns x sequences) from the chunk: a0 (g, c), a1 (g + 8, c), a2 (g, c + 4),
        // a3 (g + 8, c + 4); b0 (c, g), b1 (c + 4, g).
        const float* hk = hb + (buf * KC + lc) * BS + n0 + lg;
        const float* wk = Ws + (cc * KC + lc) * 4 * WS + e0 + lg;
#pragma unroll 2
        for (int kk = ks * 8; kk < KC; kk += p.KS * 8) {
          uint32_t bh[kNT][2], bl[kNT][2];
#pragma unroll
          for (int n = 0; n < kNT; ++n) {
            const float v[2] = {hk[kk * BS + 8 * n], hk[(kk + 4) * BS + 8 * n]};
            SplitTf32<kMma>(v, bh[n], bl[n]);
          }
#pragma unroll
          for (int m = 0; m < kMT; ++m) {
            const float* w = wk + kk * 4 * WS + 16 * m;
            const float v[4] = {w[0], w[8], w[16 * WS], w[16 * WS + 8]};
            uint32_t ah[4], al[4];
            SplitTf32<kMma>(v, ah, al);
#pragma unroll
            for (int n = 0; n < kNT; ++n)
              MmaSplit<kMma>(big[m][n], small[m][n], ah, al, bh[n], bl[n]);
          }
        }
      } else if (gemm) {
        const float4* h4 = reinterpret_cast<const float4*>(hb + buf * KC * BS) + tbg;
        const float4* w4 = Ws4 + cc * KC * WS + tu * kTU;
#pragma unroll(kTU == 1 ? 4 : 2)
        for (int k = ks; k < KC; k += p.KS) {
          float4 w[kTU], hv[kPanels];
#pragma unroll
          for (int v = 0; v < kTU; ++v) w[v] = w4[k * WS + v];
#pragma unroll
          for (int m = 0; m < kPanels; ++m) hv[m] = h4[k * NB4 + m * PW4];
#pragma unroll
          for (int m = 0; m < kPanels; ++m) {
            const float hs[4] = {hv[m].x, hv[m].y, hv[m].z, hv[m].w};
#pragma unroll
            for (int i = 0; i < 4; ++i) {
#pragma unroll
              for (int v = 0; v < kTU; ++v) {
                float* g = acc[v][m * 4 + i];
                g[0] = fmaf(w[v].x, hs[i], g[0]);
                g[1] = fmaf(w[v].y, hs[i], g[1]);
                g[2] = fmaf(w[v].z, hs[i], g[2]);
                g[3] = fmaf(w[v].w, hs[i], g[3]);
              }
            }
          }
        }
      }
      if (cc + p.bufs < p.chunks) {
        __syncthreads();  // every thread is done with this buffer
        copy_chunk(src, buf, cc + p.bufs);
      }
    }
    __syncthreads();  // the partial sums take the chunks' space
    if constexpr (kMma) {
      // d0 (g, 2c), d1 (g, 2c + 1), d2 (g + 8, 2c), d3 (g + 8, 2c + 1) of each tile, as
      // red [ks][sequence][row].
#pragma unroll
      for (int m = 0; m < kMT; ++m) {
#pragma unroll
        for (int n = 0; n < kNT; ++n) {
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const int e = e0 + 16 * m + lg + 8 * (q / 2), b = n0 + 8 * n + 2 * lc + q % 2;
            red[(ks * Bp + b) * 4 * RQ + e] = big[m][n][q] + small[m][n][q];
          }
        }
      }
    } else if (gemm) {
#pragma unroll
      for (int v = 0; v < kTU; ++v) {
#pragma unroll
        for (int m = 0; m < kPanels; ++m) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const float* g = acc[v][m * 4 + i];
            red4[(ks * Bp + (m * PW4 + tbg) * 4 + i) * RQ + tu * kTU + v] =
                make_float4(g[0], g[1], g[2], g[3]);
          }
        }
      }
    }
    __syncthreads();
  };
  // Unit u's G gate sums for sequence b from the partial sums, added in ks order.
  auto gate_sums = [&](int u, int b, float(&g)[4]) {
#pragma unroll
    for (int q = 0; q < 4; ++q) g[q] = 0.0f;
    if constexpr (G == 4) {  // the unit's rows are one quad
#pragma unroll 8
      for (int k = 0; k < p.KS; ++k) {
        const float4 v = red4[(k * Bp + b) * RQ + u];
        g[0] += v.x;
        g[1] += v.y;
        g[2] += v.z;
        g[3] += v.w;
      }
    } else {
#pragma unroll 8
      for (int k = 0; k < p.KS; ++k) {
        const float* v = red + ((k * Bp + b) * RQ) * 4 + u * G;
#pragma unroll
        for (int q = 0; q < G; ++q) g[q] += v[q];
      }
    }
  };
  // Loads the next step's input projection of this thread's cells.
  auto load_next = [&](int s) {
#pragma unroll
    for (int r = 0; r < kBatchedMaxCells; ++r) {
      const int i = tid + r * blockDim.x;
      if (i >= U * B) break;
      if (s + 1 < len[r]) {
        const int b = i / U, t = reverse ? len[r] - 2 - s : s + 1;
        const float* xp = xproj + (static_cast<int64_t>(b) * a.T + t) * XS + j0 + i % U;
#pragma unroll
        for (int q = 0; q < G; ++q) xn[r][q] = xp[q * H];
      }
    }
  };

  for (int s = 0; s < a.steps; ++s) {
    const float* hin = hbuf + (s & 1) * H * Bp;
    float* hout = hbuf + ((s + 1) & 1) * H * Bp;
    gemm_rows(hin, [&] { load_next(s); });
    float z[kBatchedMaxCells];  // reset_after=False: the update gates, until n is known
    if constexpr (kCell == FusedRnnCell::kGruBefore) {
      // r and z from h(t-1); then n from r * h(t-1) of every unit (the third hT buffer, which
      // takes a grid barrier and a second GEMM of every row, of which only the n rows count).
      float* rh = hbuf + 2 * H * Bp;
#pragma unroll
      for (int r = 0; r < kBatchedMaxCells; ++r) {
        const int i = tid + r * blockDim.x;
        if (i >= U * B) break;
        const int u = i % U, b = i / U;
        float g[4];
        gate_sums(u, b, g);
        const float rg = FusedSigmoid(x[r][0] + bs[u] + g[0]);
        z[r] = FusedSigmoid(x[r][1] + bs[U + u] + g[1]);
        rh[(j0 + u) * Bp + b] = s < len[r] ? rg * h[r] : 0.0f;
      }
      grid.sync();
      gemm_rows(rh, [] {});
    }
#pragma unroll
    for (int r = 0; r < kBatchedMaxCells; ++r) {
      const int i = tid + r * blockDim.x;
      if (i >= U * B) break;
      const int u = i % U, b = i / U, j = j0 + u;
      if (s < len[r]) {
        float g[4];
        gate_sums(u, b, g);
        if constexpr (kCell == FusedRnnCell::kGruBefore) {
          const float n = tanhf(x[r][2] + bs[2 * U + u] + g[2]);
          h[r] = (1.0f - z[r]) * n + z[r] * h[r];
        } else {
          float xb[G];
#pragma unroll
          for (int q = 0; q < G; ++q) xb[q] = x[r][q] + bs[q * U + u];
          h[r] = FusedCellStep<kCell>(xb, g, h[r], c[r], bRn[r]);
        }
#pragma unroll
        for (int q = 0; q < G; ++q) x[r][q] = xn[r][q];
      }
      hout[j * Bp + b] = h[r];
      // Step s's output is at time s (reverse: len - 1 - s); past the length, zero at time s.
      if (y) {
        const int t = s < len[r] && reverse ? len[r] - 1 - s : s;
        y[(static_cast<int64_t>(b) * a.T + t) * YS + j] = s < len[r] ? h[r] : 0.0f;
      }
    }
    grid.sync();
  }
#pragma unroll
  for (int r = 0; r < kBatchedMaxCells; ++r) {
    const int i = tid + r * blockDim.x;
    if (i >= U * B) break;
    const int u = i % U, b = i / U, j = j0 + u;
    a.hy[state + b * H + j] = h[r];
    if (a.cy) a.cy[state + b * H + j] = c[r];
    if (y) {
      for (int t = a.steps; t < a.T; ++t) y[(static_cast<int64_t>(b) * a.T + t) * YS + j] = 0.0f;
    }
  }
}

using Kernel = void (*)(FusedBatchedArgs);

template <FusedRnnCell kCell, size_t... I>
constexpr std::array<Kernel, sizeof...(I)> MakeKernels(std::index_sequence<I...>) {
  return {FusedBatchedKernel<kCell, kBatchedTiles[I].units, kBatchedTiles[I].seqs,
                             kBatchedTiles[I].mma>...};
}

template <FusedRnnCell kCell>
constexpr std::array<Kernel, kBatchedTileCount> kKernels =
    MakeKernels<kCell>(std::make_index_sequence<kBatchedTileCount>());

Kernel KernelFor(FusedRnnCell cell, int tile) {
  switch (cell) {
    case FusedRnnCell::kLstm:
      return kKernels<FusedRnnCell::kLstm>[tile];
    case FusedRnnCell::kGru:
      return kKernels<FusedRnnCell::kGru>[tile];
    case FusedRnnCell::kGruBefore:
      return kKernels<FusedRnnCell::kGruBefore>[tile];
  }
  return nullptr;
}

// Shared-memory wavefronts of one 16-byte load of the GEMM's weights by the first warp when a
// row of Ws is WS float4s long: a row of banks holds 8 float4s, lanes that read one address
// share it, and distinct addresses at the same position in the row serialise. The lanes of one
// (ks, tu) read one address (they differ in tbg; the first of them has tbg 0), and distinct
// (ks, tu) read distinct ones (tu * units < Q <= WS).
int WeightLoadWavefronts(const FusedBatchedPlan& p, const FusedBatchedTile& t, int WS) {
  const int per_tu = p.Bp / t.seqs;  // lanes a (ks, tu): its tbg
  int at[8] = {};
  for (int lane = 0; lane < 32 && lane < p.tiles * p.KS; ++lane) {
    const int tile = lane % p.tiles;
    if (tile % per_tu == 0) ++at[(lane / p.tiles * WS + tile / per_tu * t.units) % 8];
  }
  return *std::max_element(at, at + 8);
}

}  // namespace

FusedBatchedPlan PlanFusedBatched(int B, int H, int gates, int blocks, int tile,
                                  size_t smem_limit) {
  FusedBatchedPlan p;
  if (B < 1 || B > kBatchedMaxBatch || (gates != 3 && gates != 4) || blocks < 1 ||
      H % blocks != 0 || tile < 0 || tile >= kBatchedTileCount) {
    return p;
  }
  const FusedBatchedTile t = kBatchedTiles[tile];
  p.blocks = blocks;
  p.tile = tile;
  p.U = H / blocks;
  p.Q = (gates * p.U + 3) / 4;
  p.Bp = (B + t.seqs - 1) / t.seqs * t.seqs;
  // Tensor cores: whole M-tiles (4 quads; zero rows past the gates'), and chunk columns of 8 or
  // 24 floats modulo 32 banks (a fragment's 4 columns x 8 sequences on 32 banks).
  if (t.mma) p.Q = (p.Q + 3) / 4 * 4;
  p.BS = t.mma && p.Bp % 16 == 0 ? p.Bp + 8 : p.Bp;
  if (p.Q % t.units != 0) return p;
  p.tiles = p.Q / t.units * (p.Bp / t.seqs);
  if (p.tiles > kBatchedThreads || p.U * B > kBatchedMaxCells * kBatchedThreads) return p;
  if (t.mma && kBatchedWarps % p.tiles != 0) return p;  // a warp a tile and part of the columns
  // Chunks of at most 8192 floats (32 KiB; tensor cores 16384, whose padded columns would
  // otherwise split H = 512 at 16 sequences in two) and a multiple of 4 columns each (tensor
  // cores: 8).
  const int step = t.mma ? 8 : 4, most = t.mma ? 16384 : 8192;
  p.chunks = (H * p.BS + most - 1) / most;
  while (p.chunks <= H && (H % p.chunks != 0 || (H / p.chunks) % step != 0)) ++p.chunks;
  if (p.chunks > H) return p;
  p.KC = H / p.chunks;
  if (t.mma) {
    // Every warp: its tile over k-steps ks, ks + KS, ... of 8 columns of each chunk. A row of
    // Ws of 2 modulo 4 float4s puts the A fragment's 4 columns 8 or 24 banks apart.
    p.KS = kBatchedWarps / p.tiles;
    p.WS = p.Q + (6 - p.Q % 4) % 4;
  } else {
    // The most threads per tile, each over 4 columns of a chunk at least (not a power of 2
    // where the tiles are not: the GRU's 3 gate rows a unit leave 12 or 24 tiles, whose
    // threads take ceil(KC / KS) columns, some one fewer).
    p.KS = std::max(1, std::min(kBatchedThreads / p.tiles, p.KC / 4));
    // The row of Ws whose loads take the fewest wavefronts, the shortest of those.
    p.WS = p.Q;
    for (int ws = p.Q + 1, fewest = WeightLoadWavefronts(p, t, p.Q); ws < p.Q + 8; ++ws) {
      if (const int w = WeightLoadWavefronts(p, t, ws); w < fewest) p.WS = ws, fewest = w;
    }
  }
  const size_t weights = sizeof(float) * size_t{4} * (size_t{1} * H * p.WS + p.U);  // + biases
  // Tensor cores: a lane's partial sums go to sequences 2c (c = lane % 4) of one row; rows of
  // Q + 1 float4s put them 8 banks apart where Q is a multiple of 8.
  p.RQ = t.mma && p.Q % 2 == 0 ? p.Q + 1 : p.Q;
  const size_t partials = sizeof(float) * size_t{4} * p.KS * p.RQ * p.Bp;
  const size_t chunk = sizeof(float) * size_t{1} * p.KC * p.BS;
  if (weights + std::max(chunk, partials) > smem_limit) return p;
  p.bufs = static_cast<int>(std::min<size_t>(
      {(smem_limit - weights) / chunk, size_t{kBatchedMaxBufs}, static_cast<size_t>(p.chunks)}));
  p.smem = weights + std::max(p.bufs * chunk, partials);
  return p;
}

cudaError_t ConfigureFusedBatchedKernel(FusedRnnCell cell, int tile, size_t smem) {
  return RaiseDynamicSmemLimit(KernelFor(cell, tile), smem);
}

cudaError_t MaxFusedBatchedBlocksPerSm(FusedRnnCell cell, int tile, size_t smem, int* blocks) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, KernelFor(cell, tile),
                                                       kBatchedThreads, smem);
}

cudaError_t LaunchFusedBatchedKernel(const FusedBatchedArgs& args, cudaStream_t stream) {
  if (args.plan.smem == 0) return cudaErrorInvalidValue;
  FusedBatchedArgs copy = args;
  void* params[] = {&copy};
  if ((args.dirs != 1 && args.dirs != 2) || args.groups < 1) return cudaErrorInvalidValue;
  return cudaLaunchCooperativeKernel(
      reinterpret_cast<const void*>(KernelFor(args.a.cell, args.plan.tile)),
      dim3(args.plan.blocks * args.dirs * args.groups), dim3(kBatchedThreads), params,
      args.plan.smem, stream);
}

}  // namespace rnnserve::engine::cuda
