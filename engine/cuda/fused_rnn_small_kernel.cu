// The one-block LSTM and GRU (reset_after) kernel of FusedRnn for small H (fused_rnn_kernel.h).
// Plain FP32: FMAs and precise expf / tanhf, as the CPU engine computes them.

#include <algorithm>

#include "engine/cuda/fused_rnn_cell.cuh"
#include "engine/cuda/fused_rnn_cluster.cuh"
#include "engine/cuda/fused_rnn_kernel.h"
#include "engine/cuda/fused_rnn_rows.cuh"
#include "engine/cuda/launch.cuh"

namespace rnnserve::engine::cuda {
namespace {

// The threads of the kernel that keeps R's rows in registers (kH 32, 64): enough for every
// gate row (4 * 64), few enough for a row's 64 weights each.
constexpr int kSmallRegisterThreads = 512;

// dst[0..n) = src[0..n) by the whole block, four loads issued before their stores.
__device__ __forceinline__ void CopyToShared(float4* dst, const float4* src, int n) {
  const int stride = blockDim.x;
  int i = threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const float4 a = __ldg(src + i), b = __ldg(src + i + stride), c = __ldg(src + i + 2 * stride),
                 d = __ldg(src + i + 3 * stride);
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) dst[i] = __ldg(src + i);
}

// Shared memory (G = gates * H): Ws [I][G], Rs [H][G], bs [G], hs [B][H], cs [B][H], gs
// [B][G], then xs [chunk][B][G]: bias + x(t) . W of the next `chunk` steps, computed before
// them by every thread at once, so a step's serial part is h(t-1) . R and the gates. Gate rows
// are the columns of Ws and Rs, so the threads of a warp read consecutive words. gs holds xs +
// h(t-1) . R[r], except the GRU's n rows: h(t-1) . R_n alone (r * (it + bRn) comes first).
// kH (32 or 64; 0: any H): thread r < G keeps gate row r of R in registers and computes that row
// for every sequence, reading h as float4 broadcasts, instead of reading a weight from shared
// memory for every FMA (which bounded the step); the same sums in the same order.
template <FusedRnnCell kCell, int kH>
__global__ void __launch_bounds__(kH > 0 ? kSmallRegisterThreads : 1024)
    FusedRnnSmallKernel(FusedRnnSmallArgs p) {
  extern __shared__ float smem[];
  const FusedRnnArgs& a = p.a;
  const int H = a.H, I = p.I, B = a.B, G = kFusedGates<kCell> * a.H;
  float* Ws = smem;
  float* Rs = Ws + I * G;  // kH: none (R is in registers)
  float* bs = Rs + (kH > 0 ? 0 : H * G);
  float* hs = bs + G;
  float* cs = hs + B * H;
  float* gs = cs + B * H;
  float* xs = gs + B * G;
  // The weights in 16-byte loads, four in flight per thread: this prologue is latency-bound
  // (a load from device memory takes ~0.5 us), not bandwidth-bound.
  const int rs_size = kH > 0 ? 0 : H * G;
  if ((I * G) % 4 == 0 && (H * G) % 4 == 0) {  // Ws and Rs start on 16-byte boundaries
    CopyToShared(reinterpret_cast<float4*>(Ws), reinterpret_cast<const float4*>(p.Wt), I * G / 4);
    CopyToShared(reinterpret_cast<float4*>(Rs), reinterpret_cast<const float4*>(p.Rt), rs_size / 4);
  } else {  // a GRU's 3H gate rows times an odd width
    for (int i = threadIdx.x; i < I * G; i += blockDim.x) Ws[i] = __ldg(p.Wt + i);
    for (int i = threadIdx.x; i < rs_size; i += blockDim.x) Rs[i] = __ldg(p.Rt + i);
  }
  for (int i = threadIdx.x; i < G; i += blockDim.x) bs[i] = p.bias[i];
  float rr[kH > 0 ? kH : 1];  // kH: this thread's gate row of R
  if constexpr (kH > 0) {
    if (threadIdx.x < G) {
#pragma unroll
      for (int k = 0; k < kH; ++k) rr[k] = __ldg(p.Rt + k * G + threadIdx.x);
    }
  }
  for (int i = threadIdx.x; i < B * H; i += blockDim.x) {
    hs[i] = a.h0 ? a.h0[i] : 0.0f;
    cs[i] = a.c0 ? a.c0[i] : 0.0f;
  }
  for (int s0 = 0; s0 < a.steps; s0 += p.chunk) {
    const int n = min(p.chunk, a.steps - s0);
    __syncthreads();  // the weights are in; the last chunk's xs is consumed
    for (int d = threadIdx.x; d < n * B * G; d += blockDim.x) {
      const int t = s0 + d / (B * G), b = (d / G) % B, r = d % G;
      if (t >= a.lengths[b]) continue;
      const float* x = p.x + (static_cast<int64_t>(b) * a.T + t) * I;
      // Four partial sums (independent FMA chains, their loads in flight together), added in
      // a fixed order, then the bias.
      float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      int k = 0;
      for (; k + 4 <= I; k += 4) {
#pragma unroll
        for (int q = 0; q < 4; ++q) part[q] = fmaf(__ldg(x + k + q), Ws[(k + q) * G + r], part[q]);
      }
      for (; k < I; ++k) part[0] = fmaf(__ldg(x + k), Ws[k * G + r], part[0]);
      xs[d] = bs[r] + ((part[0] + part[1]) + (part[2] + part[3]));
    }
    __syncthreads();
    for (int s = s0; s < s0 + n; ++s) {
      // Every gate row of every sequence still running: xs + h(t-1) . R[r], in four partial
      // sums (independent FMA chains), added in a fixed order.
      if constexpr (kH > 0) {
        const int r = threadIdx.x;
        const bool n_row = kCell == FusedRnnCell::kGru && r >= 2 * kH;
        for (int b = 0; r < G && b < B; ++b) {
          if (s >= a.lengths[b]) continue;
          const float4* h4 = reinterpret_cast<const float4*>(hs + b * kH);
          float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
          for (int k = 0; k < kH; k += 4) {
            const float4 hv = h4[k / 4];
            acc[0] = fmaf(hv.x, rr[k], acc[0]);
            acc[1] = fmaf(hv.y, rr[k + 1], acc[1]);
            acc[2] = fmaf(hv.z, rr[k + 2], acc[2]);
            acc[3] = fmaf(hv.w, rr[k + 3], acc[3]);
          }
          const float sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
          const int d = b * G + r;
          gs[d] = n_row ? sum : xs[(s - s0) * B * G + d] + sum;
        }
      } else {
        for (int d = threadIdx.x; d < B * G; d += blockDim.x) {
          const int b = d / G, r = d % G;
          if (s >= a.lengths[b]) continue;
          const float* h = hs + b * H;
          float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
          int k = 0;
          for (; k + 4 <= H; k += 4) {
#pragma unroll
            for (int q = 0; q < 4; ++q) acc[q] = fmaf(h[k + q], Rs[(k + q) * G + r], acc[q]);
          }
          for (; k < H; ++k) acc[0] = fmaf(h[k], Rs[k * G + r], acc[0]);
          const float sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
          const bool n_row = kCell == FusedRnnCell::kGru && r >= 2 * H;
          gs[d] = n_row ? sum : xs[(s - s0) * B * G + d] + sum;
        }
      }
      __syncthreads();
      for (int i = threadIdx.x; i < B * H; i += blockDim.x) {
        const int b = i / H, j = i % H;
        const bool running = s < a.lengths[b];
        float h = hs[i];
        if (running) {
          const float* g = gs + b * G;
          if constexpr (kCell == FusedRnnCell::kLstm) {
            const float ig = FusedSigmoid(g[j]);
            const float fg = FusedSigmoid(g[H + j]);
            const float cg = tanhf(g[2 * H + j]);
            const float og = FusedSigmoid(g[3 * H + j]);
            const float c = fg * cs[i] + ig * cg;
            cs[i] = c;
            h = og * tanhf(c);
          } else {
            const float rg = FusedSigmoid(g[j]);
            const float zg = FusedSigmoid(g[H + j]);
            const float xn = xs[(s - s0) * B * G + b * G + 2 * H + j];
            const float ng = tanhf(xn + rg * (g[2 * H + j] + __ldg(a.bRn + j)));
            h = (1.0f - zg) * ng + zg * h;
          }
          hs[i] = h;
        }
        if (a.y) a.y[(static_cast<int64_t>(b) * a.T + s) * H + j] = running ? h : 0.0f;
      }
      __syncthreads();
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < B * H; i += blockDim.x) {
    const int b = i / H, j = i % H;
    a.hy[i] = hs[i];
    if (a.cy) a.cy[i] = cs[i];
    if (a.y) {
      for (int t = a.steps; t < a.T; ++t) a.y[(static_cast<int64_t>(b) * a.T + t) * H + j] = 0.0f;
    }
  }
}

}  // namespace

size_t FusedRnnSmallSmemBytes(FusedRnnCell cell, int B, int I, int H, int chunk) {
  const size_t G = FusedRnnGates(cell) * static_cast<size_t>(H);
  const size_t Rs = FusedRnnSmallRegisterRows(H) ? 0 : static_cast<size_t>(H) * G;
  return sizeof(float) * (static_cast<size_t>(I) * G + Rs + G + 2 * static_cast<size_t>(B) * H +
                          (1 + static_cast<size_t>(chunk)) * static_cast<size_t>(B) * G);
}

int FusedRnnSmallThreads(int B, int H) {
  if (FusedRnnSmallRegisterRows(H)) return kSmallRegisterThreads;
  // At least 512: the prologue's loads want many threads even when a step has little work.
  const int want = (4 * B * H + 31) / 32 * 32;
  return std::min(1024, std::max(512, want));
}

namespace {

using SmallKernel = void (*)(FusedRnnSmallArgs);

template <FusedRnnCell kCell>
SmallKernel SmallKernelOf(int H) {  // FusedRnnSmallRegisterRows' widths, or any H
  if (H == 32) return FusedRnnSmallKernel<kCell, 32>;
  if (H == 64) return FusedRnnSmallKernel<kCell, 64>;
  return FusedRnnSmallKernel<kCell, 0>;
}

SmallKernel SmallKernelFor(FusedRnnCell cell, int H) {
  if (cell == FusedRnnCell::kLstm) return SmallKernelOf<FusedRnnCell::kLstm>(H);
  if (cell == FusedRnnCell::kGru) return SmallKernelOf<FusedRnnCell::kGru>(H);
  return nullptr;
}

}  // namespace

cudaError_t ConfigureFusedRnnSmallKernel(FusedRnnCell cell, int H, size_t smem) {
  SmallKernel k = SmallKernelFor(cell, H);
  return k ? RaiseDynamicSmemLimit(k, smem) : cudaErrorInvalidValue;
}

cudaError_t LaunchFusedRnnSmallKernel(const FusedRnnSmallArgs& args, size_t smem,
                                      cudaStream_t stream) {
  SmallKernel k = SmallKernelFor(args.a.cell, args.a.H);
  if (!k) return cudaErrorInvalidValue;
  k<<<1, FusedRnnSmallThreads(args.a.B, args.a.H), smem, stream>>>(args);
  return cudaGetLastError();
}

namespace {

// The one-block register kernel (fused_rnn_kernel.h): a block a group of kL sequences (its
// blocks never wait on each other), kL lanes a hidden unit (1, 2, 4 or 8), 32 / kL units a warp.
// Lane `sub` of unit j keeps columns 4 sub + 4 kL i .. + 3 of the unit's G rows of R in registers
// (zero past H); a step sums its share of each row's dot product with h(t-1) (16-byte reads of
// shared memory, the unit groups of a warp reading the same words), adds the unit's lanes' sums in
// log2(kL) shuffles, and lane b applies sequence b's cell (b < kL), writing h(t) into the other of
// two buffers: one block barrier a step. Fewer lanes a unit mean fewer warps, each applying more
// cells at once (every warp issues the cell's instructions, which bound the step when few of its
// lanes apply one); more lanes, shorter dot products (SumLaneRowsAll over a unit's kL lanes).

// Programmatic dependent launch (sm_90): a grid launched with
// cudaLaunchAttributeProgrammaticStreamSerialization after this one may start once every block
// of this one has called LaunchDependentGrids; WaitForPrimaryGrid in it returns once the grid
// before it has finished and its writes are visible (at once where there is no such grid).
__device__ __forceinline__ void LaunchDependentGrids() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

__device__ __forceinline__ void WaitForPrimaryGrid() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Steps of input projection a cell has in flight (a step here is shorter than a load from L2),
// each in a register slot of its own: the step loop is unrolled by kBlockRegAhead so that a
// slot is read by its step and refilled for kBlockRegAhead steps on, never moved.
constexpr int kBlockRegAhead = 4;

// x(t)'s input projection of the cell of (sequence b, unit j), G rows.
template <int G>
__device__ __forceinline__ void LoadProjection(const FusedRnnArgs& a, int b, int j, int t,
                                               float (&to)[G]) {
  const float* xp = a.xproj + (static_cast<int64_t>(b) * a.T + t) * G * a.H + j;
#pragma unroll
  for (int q = 0; q < G; ++q) to[q] = xp[q * a.H];
}

template <FusedRnnCell kCell, int kH, int kL>
__global__ void __launch_bounds__(kL* kH) FusedRnnBlockRegKernel(FusedRnnArgs args) {
  constexpr int G = kFusedGates<kCell>;
  constexpr int kC = kH / (4 * kL);  // float4s of a row a lane keeps
  constexpr int kBH = kL * kH;       // a buffer: up to kL sequences
  // h(t-1) [2][B][kH] by step parity, then (reset_after=False) r * h(t-1) [B][kH]; zero past H.
  __shared__ __align__(16) float hbuf[(kCell == FusedRnnCell::kGruBefore ? 3 : 2) * kBH];
  // This block's sequences [b0, b0 + B), seqs_per_block (up to kL) of them (fewer in the last
  // block): a is args for them alone, stepping to their longest length.
  constexpr FusedRnnWeights kFp32 = FusedRnnWeights::kFp32;
  const int per_block = args.seqs_per_block > 0 ? args.seqs_per_block : kL;
  const int H = args.H, b0 = blockIdx.x * per_block;
  const int B = min(per_block, args.B - b0);
  FusedRnnArgs a = args;
  NarrowFusedArgs<G>(&a, b0, B);
  a.steps = 0;
  for (int b = 0; b < B; ++b) a.steps = max(a.steps, a.lengths[b]);
  const int sub = threadIdx.x % kL, j = threadIdx.x / kL;
  const bool unit = j < H, mine = unit && sub < B;
  float4 w[G][kC];
#pragma unroll
  for (int q = 0; q < G; ++q) {
    const float* row = a.R + (static_cast<int64_t>(q) * H + j) * H;
#pragma unroll
    for (int i = 0; i < kC; ++i) {
      const int k = 4 * (sub + kL * i);
      if (unit && k + 4 <= H && H % 4 == 0) {  // the row starts on a 16-byte boundary
        w[q][i] = __ldg(reinterpret_cast<const float4*>(row + k));
      } else {
        auto at = [&](int c) { return unit && k + c < H ? __ldg(row + k + c) : 0.0f; };
        w[q][i] = make_float4(at(0), at(1), at(2), at(3));
      }
    }
  }
  for (int i = threadIdx.x; i < static_cast<int>(sizeof(hbuf) / sizeof(float)); i += blockDim.x) {
    hbuf[i] = 0.0f;
  }
  FusedCell<kCell, false> cell;  // x from the slots
  float xq[kBlockRegAhead][G];
  if (mine) cell.Start(a, sub, j);
  // A programmatic dependent of the input projection (LaunchFusedRnnBlockRegKernel): everything
  // above overlapped it; xproj is read only from here.
  WaitForPrimaryGrid();
  if (mine) {
#pragma unroll
    for (int d = 0; d < kBlockRegAhead; ++d) {
      if (d < cell.len) LoadProjection(a, sub, j, d, xq[d]);
    }
  }
  __syncthreads();
  if (mine) hbuf[sub * kH + j] = cell.h;
  __syncthreads();
  for (int s0 = 0; s0 < a.steps; s0 += kBlockRegAhead) {
#pragma unroll
    for (int u = 0; u < kBlockRegAhead; ++u) {
      const int s = s0 + u;
      if (s >= a.steps) break;
#pragma unroll
      for (int q = 0; q < G; ++q) cell.x[q] = xq[u][q];
      const float* hs = hbuf + (s & 1) * kBH;
      float* hn = hbuf + ((s + 1) & 1) * kBH;
      float gates[G];
#pragma unroll
      for (int q = 0; q < G; ++q) gates[q] = 0.0f;
      if constexpr (kCell == FusedRnnCell::kGruBefore) {
        // reset_after=False: r and z from h(t-1), then n from r * h(t-1) of every unit.
        float* rh = hbuf + 2 * kBH;
        SumLaneRowsAll<kFp32, kH, kL, 0, 2>(w, hs, B, sub, gates);
        float z = 0.0f;
        if (mine) {
          const float r = FusedSigmoid(cell.x[0] + gates[0]);
          z = FusedSigmoid(cell.x[1] + gates[1]);
          rh[sub * kH + j] = s < cell.len ? r * cell.h : 0.0f;
        }
        __syncthreads();
        SumLaneRowsAll<kFp32, kH, kL, 2, 3>(w, rh, B, sub, gates);
        if (mine && s < cell.len) {
          const float n = tanhf(cell.x[2] + gates[2]);
          cell.h = (1.0f - z) * n + z * cell.h;
        }
      } else {
        SumLaneRowsAll<kFp32, kH, kL, 0, G>(w, hs, B, sub, gates);
        if (mine && s < cell.len) {
          cell.h = FusedCellStep<kCell>(cell.x, gates, cell.h, cell.c, cell.bRn);
        }
      }
      if (mine) {
        hn[sub * kH + j] = cell.h;
        cell.Emit(a, sub, j, s);
        if (s + kBlockRegAhead < cell.len) LoadProjection(a, sub, j, s + kBlockRegAhead, xq[u]);
      }
      __syncthreads();
    }
  }
  if (mine) cell.Finish(a, sub, j);
}

using BlockRegKernel = void (*)(FusedRnnArgs);

// A lane keeps at most 128 of R's weights: one lane a unit at kH = 32 only.
template <FusedRnnCell kCell, int kH, int kL>
BlockRegKernel BlockRegKernelOfWidth() {
  if constexpr (kFusedGates<kCell> * kH / kL > 128) {
    return nullptr;
  } else {
    return FusedRnnBlockRegKernel<kCell, kH, kL>;
  }
}

template <FusedRnnCell kCell, int kL>
BlockRegKernel BlockRegKernelOf(int H) {
  if (H <= 32) return BlockRegKernelOfWidth<kCell, 32, kL>();
  if (H <= 64) return BlockRegKernelOfWidth<kCell, 64, kL>();
  return nullptr;
}

template <int kL>
BlockRegKernel BlockRegKernelFor(FusedRnnCell cell, int H) {
  switch (cell) {
    case FusedRnnCell::kLstm:
      return BlockRegKernelOf<FusedRnnCell::kLstm, kL>(H);
    case FusedRnnCell::kGru:
      return BlockRegKernelOf<FusedRnnCell::kGru, kL>(H);
    case FusedRnnCell::kGruBefore:
      return BlockRegKernelOf<FusedRnnCell::kGruBefore, kL>(H);
  }
  return nullptr;
}

BlockRegKernel BlockRegKernelFor(FusedRnnCell cell, int H, int lanes) {
  switch (lanes) {
    case 1:
      return BlockRegKernelFor<1>(cell, H);
    case 2:
      return BlockRegKernelFor<2>(cell, H);
    case 4:
      return BlockRegKernelFor<4>(cell, H);
    case 8:
      return BlockRegKernelFor<8>(cell, H);
    default:
      return nullptr;
  }
}

}  // namespace

bool FusedRnnBlockRegCompiled(FusedRnnCell cell, int H, int lanes) {
  return BlockRegKernelFor(cell, H, lanes) != nullptr;
}

cudaError_t LaunchFusedRnnBlockRegKernel(const FusedRnnArgs& args, int lanes, cudaStream_t stream) {
  if (args.H < 1 || args.H > kFusedBlockRegMaxHidden || args.B < 1 || args.R == nullptr ||
      args.weights != FusedRnnWeights::kFp32) {
    return cudaErrorInvalidValue;
  }
  BlockRegKernel k = BlockRegKernelFor(args.cell, args.H, lanes);
  if (!k) return cudaErrorInvalidValue;
  const int per_block = args.seqs_per_block > 0 ? args.seqs_per_block : lanes;
  if (per_block > lanes) return cudaErrorInvalidValue;
  // A programmatic dependent of the kernel before it (the input projection): its prologue
  // (R into registers, the states) runs while that kernel finishes.
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((args.B + per_block - 1) / per_block);
  cfg.blockDim = dim3(lanes * (args.H <= 32 ? 32 : 64));
  cfg.stream = stream;
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, k, args);
}

namespace {

// Rows of x a thread of the small projection takes (each W^T load serves that many).
constexpr int kProjectionRows = 4;

// out[r][n] = bias[n] + x[r] . Wt[:, n] for kProjectionRows rows r from 4 blockIdx.y (plus
// 65535 blockIdx.z) and n a thread: each W^T weight read once for the rows, x read 16 bytes at a
// time where I allows (every block's threads share its rows), one FMA chain a row.
__global__ void __launch_bounds__(256)
    SmallProjectionKernel(const float* __restrict__ x, const float* __restrict__ Wt,
                          const float* __restrict__ bias, float* __restrict__ out, int64_t rows,
                          int I, int N) {
  // The recurrent kernel launched after this one may start its prologue now.
  LaunchDependentGrids();
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t r0 = kProjectionRows * (blockIdx.y + int64_t{65535} * blockIdx.z);
  if (n >= N || r0 >= rows) return;
  const float* xr[kProjectionRows];
#pragma unroll
  for (int i = 0; i < kProjectionRows; ++i) xr[i] = x + (r0 + i < rows ? r0 + i : rows - 1) * I;
  float acc[kProjectionRows] = {};
  int k = 0;
  if (I % 4 == 0) {  // rows of x start on 16-byte boundaries
    for (; k < I; k += 4) {
      float w[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) w[q] = __ldg(Wt + int64_t{k + q} * N + n);
#pragma unroll
      for (int i = 0; i < kProjectionRows; ++i) {
        const float4 xv = __ldg(reinterpret_cast<const float4*>(xr[i] + k));
        acc[i] = fmaf(xv.x, w[0], acc[i]);
        acc[i] = fmaf(xv.y, w[1], acc[i]);
        acc[i] = fmaf(xv.z, w[2], acc[i]);
        acc[i] = fmaf(xv.w, w[3], acc[i]);
      }
    }
  }
  for (; k < I; ++k) {
    const float w = __ldg(Wt + int64_t{k} * N + n);
#pragma unroll
    for (int i = 0; i < kProjectionRows; ++i) acc[i] = fmaf(__ldg(xr[i] + k), w, acc[i]);
  }
  const float b = bias ? bias[n] : 0.0f;
#pragma unroll
  for (int i = 0; i < kProjectionRows; ++i) {
    if (r0 + i < rows) out[(r0 + i) * N + n] = bias ? b + acc[i] : acc[i];
  }
}

}  // namespace

cudaError_t LaunchFusedRnnSmallProjection(const float* x, const float* Wt, const float* bias,
                                          float* out, int64_t rows, int I, int N,
                                          cudaStream_t stream) {
  const int64_t groups = (rows + kProjectionRows - 1) / kProjectionRows;
  if (rows < 1 || I < 1 || N < 1 || groups > int64_t{65535} * 65535) return cudaErrorInvalidValue;
  const dim3 grid((N + 255) / 256, static_cast<unsigned>(std::min<int64_t>(groups, 65535)),
                  static_cast<unsigned>((groups + 65534) / 65535));
  SmallProjectionKernel<<<grid, 256, 0, stream>>>(x, Wt, bias, out, rows, I, N);
  return cudaGetLastError();
}

}  // namespace rnnserve::engine::cuda
