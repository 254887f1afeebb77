// The thread-block-cluster recurrent kernel of FusedRnn (fused_rnn.h), LSTM or GRU. Plain FP32:
// FMAs and precise expf / tanhf, as the cooperative kernel and the CPU engine compute them.
//
// One cluster of kC blocks of 4G warps (G gates: 16 warps for the LSTM, 12 for the GRU); block
// k (its rank in the cluster) owns hidden units [k*U, (k+1)*U), U = H / kC, and the G*U rows of
// R [G*H, H] of their gates, U / 4 rows a warp. Warp w owns the block's local rows
// [w*kRowsPerWarp, (w+1)*kRowsPerWarp) (local row g*U + u is R's row g*H + k*U + u); lane l
// holds columns 128*c + 4*l .. +3 of each of them. The first kRegRows of a warp's rows live in
// registers for all steps, the rest in shared memory.
// Each step:
//   1. every warp computes its rows . h(t-1)[b] for each sequence b from h(t-1) in its own
//      block's shared memory, then reduces across lanes with a reduce-scatter;
//   2. one thread per (b, u) of the block applies the cell (h, the LSTM's c and the GRU's bRn
//      stay in its registers); its input projection for the next step is loaded one step ahead;
//   3. the block's new h slice is stored into every block's shared memory (distributed shared
//      memory), in the buffer of the next step's parity, and the cluster synchronises.

#include <cooperative_groups.h>

#include "engine/cuda/fused_rnn_cell.cuh"
#include "engine/cuda/fused_rnn_kernel.h"
#include "engine/cuda/launch.cuh"

namespace rnnserve::engine::cuda {
namespace {

namespace cg = cooperative_groups;

__device__ __forceinline__ float Dot4(float4 r, float4 h, float acc) {
  acc = fmaf(r.x, h.x, acc);
  acc = fmaf(r.y, h.y, acc);
  acc = fmaf(r.z, h.z, acc);
  return fmaf(r.w, h.w, acc);
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

template <FusedRnnCell kCell, int kH, int kC, int kRegRows>
struct ClusterShape {
  static constexpr int kGates = kFusedGates<kCell>;
  static constexpr int kU = kH / kC;
  static constexpr int kRows = kGates * kU;
  static constexpr int kWarps = 4 * kGates;  // so that a warp has U / 4 rows, whatever the cell
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kRowsPerWarp = kRows / kWarps;
  static constexpr int kSmemRows = kRowsPerWarp - kRegRows;  // per warp
  static constexpr int kChunks = kH / 128;                   // float4 per lane per row
  static_assert(kH % 128 == 0 && kH % kC == 0 && kU % 4 == 0 && kRows % kWarps == 0);
  static_assert(kRowsPerWarp >= 1 && kRowsPerWarp <= 32 &&
                (kRowsPerWarp & (kRowsPerWarp - 1)) == 0);
  static_assert(kRegRows >= 1 && kRegRows <= kRowsPerWarp);
  static_assert(kClusterMaxBatch * kU <= kThreads);

  // Shared memory, floats: Rs [kWarps][kSmemRows][kH], hs [2][B][kH], gs [B][kRows],
  // hstage [B][kU]; each a multiple of 4 floats, so that every array is 16-byte aligned.
  static constexpr size_t SmemBytes(int B) {
    return sizeof(float) *
           (static_cast<size_t>(kWarps) * kSmemRows * kH + static_cast<size_t>(2) * B * kH +
            static_cast<size_t>(B) * kRows + static_cast<size_t>(B) * kU);
  }
};

template <FusedRnnCell kCell, int kH, int kC, int kRegRows>
__global__ void __launch_bounds__((ClusterShape<kCell, kH, kC, kRegRows>::kThreads), 1)
    FusedRnnClusterKernel(FusedRnnArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  // Thread-block clusters need sm_90+. Builds for Ampere and Ada (sm_80..89) keep an empty body:
  // FusedRnn::FindCluster chooses this kernel only on a device with cudaDevAttrClusterLaunch.
  (void)a;
  __trap();
#else
  using S = ClusterShape<kCell, kH, kC, kRegRows>;
  constexpr int kG = S::kGates, kU = S::kU, kRows = S::kRows, kRpw = S::kRowsPerWarp;
  constexpr int kChunks = S::kChunks, kSmemRows = S::kSmemRows;
  cg::cluster_group cluster = cg::this_cluster();
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  const int B = a.B;
  const int j0 = static_cast<int>(cluster.block_rank()) * kU;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* Rs = smem;
  float* hs = Rs + S::kWarps * kSmemRows * kH;
  float* gs = hs + 2 * B * kH;
  float* hstage = gs + B * kRows;
  auto global_row = [&](int local_row) {
    const int g = local_row / kU, u = local_row % kU;
    return static_cast<int64_t>(g) * kH + j0 + u;
  };

  // This warp's register rows of R.
  float4 Rr[kRegRows][kChunks];
#pragma unroll
  for (int r = 0; r < kRegRows; ++r) {
    const float* row = a.R + global_row(warp * kRpw + r) * kH;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      Rr[r][c] = *reinterpret_cast<const float4*>(row + 128 * c + 4 * lane);
    }
  }
  // The shared-memory rows of every warp.
  if constexpr (kSmemRows > 0) {
    for (int i = threadIdx.x; i < S::kWarps * kSmemRows * kH / 4; i += blockDim.x) {
      const int srow = i / (kH / 4), col = 4 * (i % (kH / 4));
      const int w = srow / kSmemRows, r = kRegRows + srow % kSmemRows;
      reinterpret_cast<float4*>(Rs)[i] =
          *reinterpret_cast<const float4*>(a.R + global_row(w * kRpw + r) * kH + col);
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
        for (int k = 0; k < kChunks; ++k) acc[r] = Dot4(Rr[r][k], hv[k], acc[r]);
      }
#pragma unroll
      for (int r = kRegRows; r < kRpw; ++r) {
        const float* row = Rs + (warp * kSmemRows + (r - kRegRows)) * kH;
        acc[r] = 0.0f;
#pragma unroll
        for (int k = 0; k < kChunks; ++k) {
          acc[r] = Dot4(*reinterpret_cast<const float4*>(row + 128 * k + 4 * lane), hv[k], acc[r]);
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

// The shapes compiled: registers hold what shared memory (~227 KiB a block) cannot.
struct Variant {
  FusedRnnCell cell;
  int H, cluster, threads;
  void (*kernel)(FusedRnnArgs);
  size_t (*smem_bytes)(int B);
};

template <FusedRnnCell kCell, int kH, int kC, int kRegRows>
constexpr Variant MakeVariant() {
  using S = ClusterShape<kCell, kH, kC, kRegRows>;
  return {kCell, kH, kC, S::kThreads, FusedRnnClusterKernel<kCell, kH, kC, kRegRows>, [](int B) {
            return S::SmemBytes(B);
          }};
}

constexpr FusedRnnCell kLstm = FusedRnnCell::kLstm, kGru = FusedRnnCell::kGru;

// LSTM (512 threads, at most 128 registers a thread). H=512 over 16 blocks: 128 rows a
// block, 3 of each warp's 8 in registers (48 floats a thread), 5 in shared memory (160 KiB).
// H=256 over 16 blocks: all 4 rows of a warp in registers. H=256 over 8 (the portable size):
// 4 of 8 in registers. H=128 over 8: all in registers.
// GRU (384 threads, at most 168 registers a thread): the same rows a warp, more of them in
// registers. H=512 over 16: 96 rows a block, 5 of each warp's 8 in registers (80 floats), 3
// in shared memory (72 KiB). H=256 over 16 and H=128 over 8: all 4 in registers. H=256 over
// 8: 8 of 8 in registers (64 floats).
constexpr Variant kVariants[] = {
    MakeVariant<kLstm, 512, 16, 3>(), MakeVariant<kLstm, 256, 16, 4>(),
    MakeVariant<kLstm, 256, 8, 4>(),  MakeVariant<kLstm, 128, 8, 4>(),
    MakeVariant<kGru, 512, 16, 5>(),  MakeVariant<kGru, 256, 16, 4>(),
    MakeVariant<kGru, 256, 8, 8>(),   MakeVariant<kGru, 128, 8, 4>(),
};

const Variant* Find(FusedRnnCell cell, int H, int cluster) {
  for (const Variant& v : kVariants) {
    if (v.cell == cell && v.H == H && v.cluster == cluster) return &v;
  }
  return nullptr;
}

cudaLaunchConfig_t Config(const Variant& v, size_t smem, cudaStream_t stream,
                          cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(v.cluster);
  cfg.blockDim = dim3(v.threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = v.cluster;
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

}  // namespace

std::vector<int> FusedRnnClusterSizes(FusedRnnCell cell, int H) {
  std::vector<int> out;
  for (const Variant& v : kVariants) {
    if (v.cell == cell && v.H == H) out.push_back(v.cluster);
  }
  return out;
}

size_t FusedRnnClusterSmemBytes(FusedRnnCell cell, int B, int H, int cluster) {
  const Variant* v = Find(cell, H, cluster);
  return v ? v->smem_bytes(B) : 0;
}

cudaError_t ConfigureFusedRnnClusterKernel(FusedRnnCell cell, int H, int cluster, size_t smem) {
  const Variant* v = Find(cell, H, cluster);
  if (!v) return cudaErrorInvalidValue;
  cudaError_t e = RaiseDynamicSmemLimit(v->kernel, smem);
  if (e != cudaSuccess || cluster <= 8) return e;
  return cudaFuncSetAttribute(v->kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
}

cudaError_t MaxActiveFusedRnnClusters(FusedRnnCell cell, int H, int cluster, size_t smem,
                                      int* clusters) {
  const Variant* v = Find(cell, H, cluster);
  if (!v) return cudaErrorInvalidValue;
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = Config(*v, smem, nullptr, &attr);
  return cudaOccupancyMaxActiveClusters(clusters, v->kernel, &cfg);
}

cudaError_t LaunchFusedRnnClusterKernel(const FusedRnnArgs& args, int cluster, size_t smem,
                                        cudaStream_t stream) {
  const Variant* v = Find(args.cell, args.H, cluster);
  if (!v || args.B > kClusterMaxBatch) return cudaErrorInvalidValue;
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = Config(*v, smem, stream, &attr);
  return cudaLaunchKernelEx(&cfg, v->kernel, args);
}

}  // namespace rnnserve::engine::cuda
