// The resident step loop's register kernel (resident_loop_kernel.h), and the input projection
// it reads. The synchronisation is the shared-memory kernel's (resident_loop_sync.cuh): one
// grid barrier a step, block 0 admits between steps. What differs is a step's compute:
//   - block b owns hidden units [b * kUnits, (b + 1) * kUnits), their kRows = G * kUnits rows
//     of R in registers: lane l of every warp holds columns [l * kLanes, (l + 1) * kLanes) of
//     each row (zero past H and past the last unit), so every warp can take any slot;
//   - a warp takes kSlots = 32 / kRp active slots at once (kRp: kRows rounded up to a power of
//     two): each lane multiplies its columns of h(t-1) (16-byte loads from L2) by its weights
//     into kSlots * kRp partial sums, and a butterfly reduce-scatter across the warp (31
//     shuffles) leaves lane i * kRp + r with the sum of row r for slot i;
//   - lanes i * kUnits + u then apply the cell of (slot i, unit u) from the gate sums (through
//     the warp's 32 floats of shared memory) and the step's input projection, computed once
//     at join for the whole sequence (LaunchResidentProjection) and loaded before the sums.
// Plain FP32: FMAs and precise expf / tanhf (fused_rnn_cell.cuh), summed in another order than
// the other kernels.

#include "engine/cuda/fused_rnn_cell.cuh"
#include "engine/cuda/resident_loop_kernel.h"
#include "engine/cuda/resident_loop_sync.cuh"

namespace rnnserve::engine::cuda {
namespace {

using resident_detail::AdmitFirst;
using resident_detail::AdmitState;
using resident_detail::GridBarrier;
using resident_detail::ResidentAdmit;
using resident_detail::StartStep;

constexpr int kWarps = kResidentThreads / 32;

__host__ __device__ constexpr int Pow2AtLeast(int n) {
  return n <= 4 ? 4 : n <= 8 ? 8 : n <= 16 ? 16 : 32;
}

// Whether the kernel is compiled for (G gates, units, lanes): at most 64 weights and 64 floats
// of h (kSlots * kLanes) a thread.
__host__ __device__ constexpr bool Compiled(int G, int units, int lanes) {
  return (units == 1 || units == 2 || units == 4) && (lanes == 4 || lanes == 8) &&
         G * units * lanes <= 64 && 32 / Pow2AtLeast(G * units) * lanes <= 64;
}

// One butterfly step of ReduceScatter: lanes with bit kO set keep v[kO .. 2 kO), the others
// v[0 .. kO), each adding its partner's half, into v[0 .. kO).
template <int kO>
__device__ __forceinline__ void ReduceHalf(float (&v)[32], int lane) {
  const bool upper = (lane & kO) != 0;
#pragma unroll
  for (int i = 0; i < kO; ++i) {
    const float send = upper ? v[i] : v[i + kO];
    const float keep = upper ? v[i + kO] : v[i];
    v[i] = keep + __shfl_xor_sync(0xffffffffu, send, kO);
  }
}

// v[i] summed across the warp's lanes; lane l gets the sum of v[l] (31 shuffles).
__device__ __forceinline__ float ReduceScatter(float (&v)[32], int lane) {
  ReduceHalf<16>(v, lane);
  ReduceHalf<8>(v, lane);
  ReduceHalf<4>(v, lane);
  ReduceHalf<2>(v, lane);
  ReduceHalf<1>(v, lane);
  return v[0];
}

template <FusedRnnCell kCell, int kUnits, int kLanes>
__global__ void __launch_bounds__(kResidentThreads, 1) ResidentRegLoop(const ResidentLoopArgs a) {
  constexpr int G = kFusedGates<kCell>;
  constexpr int kRows = G * kUnits, kRp = Pow2AtLeast(kRows), kSlots = 32 / kRp;
  extern __shared__ float cs[];  // [capacity][kUnits] LSTM's c
  __shared__ unsigned char pending[kResidentMaxSlots];
  __shared__ float sums[kWarps][32];
  __shared__ unsigned step_word;  // this step's active count | quit << 31
  __shared__ int finished_here;   // a slot finished in this block's step: fence to the host
  const int H = a.H, HS = a.h_stride, GH = G * a.H, cap = a.capacity;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, j0 = blockIdx.x * kUnits;
  float w[kRows][kLanes];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int j = j0 + r / G, g = r % G;
#pragma unroll
    for (int e = 0; e < kLanes; ++e) {
      const int k = lane * kLanes + e;
      w[r][e] = j < H && k < H ? __ldg(a.R + (static_cast<int64_t>(g) * H + j) * H + k) : 0.0f;
    }
  }
  // This lane's cell, if any: slot ci of the warp's group, unit cj.
  const int ci = lane / kUnits, cu = lane % kUnits, cj = j0 + cu;
  const bool cell_lane = lane < kSlots * kUnits && cj < H;
  const float bRn = kCell == FusedRnnCell::kGru && cell_lane ? a.bRn[cj] : 0.0f;
  for (int i = threadIdx.x; i < kResidentMaxSlots; i += blockDim.x) pending[i] = 0;
  if (threadIdx.x == 0) finished_here = 0;
  __syncthreads();
  unsigned phase = 0, admitted = 0;
  AdmitState adm;
  if (blockIdx.x == 0) admitted = AdmitFirst(a, adm, pending);
  for (int k = 0;; ++k) {
    const int p = k & 1;
    GridBarrier(a.state, phase, &finished_here, admitted, &step_word);
    if (blockIdx.x == 0) StartStep(a, adm, pending);
    if (step_word >> 31) return;
    const int n = static_cast<int>(step_word & 0x7fffffffu);
    const int4* list = reinterpret_cast<const int4*>(a.list) + p * cap;
    const float* hprev = a.h + static_cast<int64_t>(p) * cap * HS;
    float* hnext = a.h + static_cast<int64_t>(p ^ 1) * cap * HS;
    for (int g0 = warp * kSlots; g0 < n; g0 += kWarps * kSlots) {
      // The group's (slot, step, length); length 0 past the active ones.
      int4 e[kSlots];
#pragma unroll
      for (int i = 0; i < kSlots; ++i) {
        e[i] = g0 + i < n ? __ldcg(&list[g0 + i]) : make_int4(0, 0, 0, 0);
      }
      int4 me = make_int4(0, 0, 0, 0);
#pragma unroll
      for (int i = 0; i < kSlots; ++i) {
        if (i == ci) me = e[i];
      }
      const bool cell = cell_lane && me.z > 0;
      // The cell's input projection of this step and (GRU) its h(t-1), before the sums.
      float x[G], hp = 0.0f;
#pragma unroll
      for (int g = 0; g < G; ++g) x[g] = 0.0f;
      if (cell) {
        const float* xp = a.xproj + (static_cast<int64_t>(me.x) * a.max_steps + me.y) * GH + cj;
#pragma unroll
        for (int g = 0; g < G; ++g) x[g] = __ldcg(xp + g * H);
        if (kCell == FusedRnnCell::kGru && me.y > 0) {
          hp = __ldcg(hprev + static_cast<int64_t>(me.x) * HS + cj);
        }
      }
      float acc[32];
#pragma unroll
      for (int i = 0; i < 32; ++i) acc[i] = 0.0f;
#pragma unroll
      for (int i = 0; i < kSlots; ++i) {
        if (e[i].z == 0 || e[i].y == 0) continue;  // h(-1) is zero
        float hv[kLanes];
        const float4* src =
            reinterpret_cast<const float4*>(hprev + static_cast<int64_t>(e[i].x) * HS) +
            lane * (kLanes / 4);
#pragma unroll
        for (int q = 0; q < kLanes / 4; ++q) {
          const float4 v = __ldcg(src + q);
          hv[4 * q] = v.x;
          hv[4 * q + 1] = v.y;
          hv[4 * q + 2] = v.z;
          hv[4 * q + 3] = v.w;
        }
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
#pragma unroll
          for (int c = 0; c < kLanes; ++c)
            acc[i * kRp + r] = fmaf(w[r][c], hv[c], acc[i * kRp + r]);
        }
      }
      sums[warp][lane] = ReduceScatter(acc, lane);
      __syncwarp();
      if (cell) {
        float gs[G];
#pragma unroll
        for (int g = 0; g < G; ++g) gs[g] = sums[warp][ci * kRp + cu * G + g];
        const int s = me.x, t = me.y;
        float& cref = cs[s * kUnits + cu];
        float c = kCell == FusedRnnCell::kLstm && t > 0 ? cref : 0.0f;
        const float h = FusedCellStep<kCell>(x, gs, hp, c, bRn);
        const int64_t sj = static_cast<int64_t>(s) * H + cj;
        __stcg(hnext + static_cast<int64_t>(s) * HS + cj, h);
        if constexpr (kCell == FusedRnnCell::kLstm) cref = c;
        if (a.y) a.y[(static_cast<int64_t>(s) * a.max_steps + t) * H + cj] = h;
        if (t + 1 == me.z) {
          finished_here = 1;
          a.hy[sj] = h;
          if constexpr (kCell == FusedRnnCell::kLstm) a.cy[sj] = c;
        }
      }
      __syncwarp();
    }
    if (blockIdx.x == 0) {
      __syncthreads();
      admitted = ResidentAdmit(a, p, adm, pending);
    }
  }
}

template <FusedRnnCell kCell, int kUnits, int kLanes>
const void* KernelIf() {
  if constexpr (Compiled(kFusedGates<kCell>, kUnits, kLanes)) {
    return reinterpret_cast<const void*>(&ResidentRegLoop<kCell, kUnits, kLanes>);
  } else {
    return nullptr;
  }
}

template <FusedRnnCell kCell>
const void* KernelFor(int units, int lanes) {
  const bool four = lanes == 4;
  switch (units) {
    case 1:
      return four ? KernelIf<kCell, 1, 4>() : KernelIf<kCell, 1, 8>();
    case 2:
      return four ? KernelIf<kCell, 2, 4>() : KernelIf<kCell, 2, 8>();
    case 4:
      return four ? KernelIf<kCell, 4, 4>() : KernelIf<kCell, 4, 8>();
    default:
      return nullptr;
  }
}

// xp[t, r] = bias[r] + sum_k x[t, k] * W[r, k] for t < length: kProjSteps steps and 256 rows a
// block, x's columns through shared memory kProjK at a time (x is the host's pinned staging,
// read over the bus: no copy before the launch), WT [I, GH] read along rows.
constexpr int kProjSteps = 16, kProjK = 128;

__global__ void __launch_bounds__(kResidentThreads)
    ResidentProjection(const float* WT, const float* bias, const float* x, float* xp, int I, int GH,
                       int length) {
  __shared__ float xs[kProjSteps][kProjK];
  const int t0 = blockIdx.x * kProjSteps, r = blockIdx.y * kResidentThreads + threadIdx.x;
  const int nt = min(kProjSteps, length - t0);
  float acc[kProjSteps];
#pragma unroll
  for (int t = 0; t < kProjSteps; ++t) acc[t] = 0.0f;
  for (int k0 = 0; k0 < I; k0 += kProjK) {
    const int nk = min(kProjK, I - k0);
    __syncthreads();
    for (int i = threadIdx.x; i < kProjSteps * kProjK; i += kResidentThreads) {
      const int t = i / kProjK, k = i % kProjK;
      xs[t][k] = t < nt && k < nk ? x[static_cast<int64_t>(t0 + t) * I + k0 + k] : 0.0f;
    }
    __syncthreads();
    if (r < GH) {
      // 8 columns' weights loaded at once: their L2 round trips overlap.
      int k = 0;
      for (; k + 8 <= nk; k += 8) {
        float wv[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) wv[u] = __ldg(WT + static_cast<int64_t>(k0 + k + u) * GH + r);
#pragma unroll
        for (int u = 0; u < 8; ++u) {
#pragma unroll
          for (int t = 0; t < kProjSteps; ++t) acc[t] = fmaf(wv[u], xs[t][k + u], acc[t]);
        }
      }
      for (; k < nk; ++k) {
        const float wv = __ldg(WT + static_cast<int64_t>(k0 + k) * GH + r);
#pragma unroll
        for (int t = 0; t < kProjSteps; ++t) acc[t] = fmaf(wv, xs[t][k], acc[t]);
      }
    }
  }
  if (r >= GH) return;
  const float b = bias[r];
#pragma unroll
  for (int t = 0; t < kProjSteps; ++t) {
    if (t < nt) xp[static_cast<int64_t>(t0 + t) * GH + r] = acc[t] + b;
  }
}

}  // namespace

int ResidentRegLanes(FusedRnnCell cell, int H, int units) {
  if (cell != FusedRnnCell::kLstm && cell != FusedRnnCell::kGru) return 0;
  const int lanes = H <= 128 ? 4 : H <= 256 ? 8 : 0;
  return lanes > 0 && Compiled(FusedRnnGates(cell), units, lanes) ? lanes : 0;
}

const void* ResidentRegKernel(const ResidentLoopArgs& a) {
  if (a.lanes == 0) return nullptr;
  return a.cell == FusedRnnCell::kLstm ? KernelFor<FusedRnnCell::kLstm>(a.units, a.lanes)
                                       : KernelFor<FusedRnnCell::kGru>(a.units, a.lanes);
}

size_t ResidentRegSmem(const ResidentLoopArgs& a) {
  return sizeof(float) * static_cast<size_t>(a.capacity) * a.units;
}

cudaError_t LaunchResidentProjection(const ResidentLoopArgs& a, int slot, int length,
                                     cudaStream_t stream) {
  const int GH = FusedRnnGates(a.cell) * a.H;
  const dim3 grid((length + kProjSteps - 1) / kProjSteps,
                  (GH + kResidentThreads - 1) / kResidentThreads);
  const int64_t s = slot;
  ResidentProjection<<<grid, kResidentThreads, 0, stream>>>(
      a.WT, a.bias, a.x + s * a.max_steps * a.I, a.xproj + s * a.max_steps * GH, a.I, GH, length);
  return cudaGetLastError();
}

}  // namespace rnnserve::engine::cuda
