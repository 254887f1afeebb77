// FusedRnn's register kernel (fused_rnn_kernel.h): the grid kernel with each block's rows of R
// in its threads' registers instead of shared memory, for the widths it is compiled for.
// Plain FP32: FMAs and precise expf / tanhf, as the other fused kernels; with BF16 / FP16
// weights (layers compiled in those modes) R is held in that precision, half the registers,
// and widened to FP32 as it is used (fused_rnn_cluster.cuh), everything else as in FP32.
//
// Block k has U warps, warp w owns hidden unit j = k*U + w (of its group of sequences: with
// FusedRnnArgs::groups, each group runs on its own H / U blocks) and keeps its G rows of R in
// registers: lane l holds columns 4l .. 4l+3 of every 128, as float4s. A step: all threads
// gather h(t-1) of every sequence into shared memory (tagged words, fused_rnn_exchange.cuh;
// two buffers by step parity, so that one block barrier a step suffices); each warp computes
// its unit's G dot products for each sequence b (16-byte reads of h, FMAs, a butterfly sum
// across the warp) and lane b applies the cell to sequence b and stores its h(t). No shared
// memory round trip of the gates and no second barrier: the warp that sums a unit's gates
// applies its cell.

#include "engine/cuda/fused_rnn_cell.cuh"
#include "engine/cuda/fused_rnn_cluster.cuh"
#include "engine/cuda/fused_rnn_exchange.cuh"
#include "engine/cuda/fused_rnn_kernel.h"
#include "engine/cuda/fused_rnn_rows.cuh"
#include "engine/cuda/launch.cuh"

namespace rnnserve::engine::cuda {
namespace {

// A warp's unit: its 32 lanes hold the unit's rows (fused_rnn_rows.cuh).
template <FusedRnnWeights kW, int kH, int kQ0, int kQ1, typename Chunk, int G, int kI>
__device__ __forceinline__ void SumRows(const Chunk (&w)[G][kI], const float* hs, int B, int lane,
                                        float (&gates)[G]) {
  SumLaneRowsAll<kW, kH, 32, kQ0, kQ1>(w, hs, B, lane, gates);
}

// The end of a step for the cell of (sequence lane, unit j), where `mine`: its h(t) into the next
// exchange block, tagged, and its output of step s.
template <int kH, typename Cell>
__device__ __forceinline__ void PublishCell(Cell& cell, const FusedRnnArgs& a, FusedWord* out,
                                            int lane, int j, int s, unsigned tag, bool mine) {
  if (!mine) return;
  StoreFusedWord(out + lane * kH + j, cell.h, tag);
  cell.Emit(a, lane, j, s);
}

// The cell's step from its gates where its sequence still runs (past its length h stays), then
// PublishCell.
template <FusedRnnCell kCell, int kH, typename Cell, int G>
__device__ __forceinline__ void StepAndPublishCell(Cell& cell, const float (&gates)[G],
                                                   const FusedRnnArgs& a, FusedWord* out, int lane,
                                                   int j, int s, unsigned tag, bool mine) {
  if (mine && s < cell.len) {
    cell.h = FusedCellStep<kCell>(cell.x, gates, cell.h, cell.c, cell.bRn);
  }
  PublishCell<kH>(cell, a, out, lane, j, s, tag, mine);
}

// Unit j's G rows of R (a.R or a.R16, as kW says) into a warp's registers: lane l holds columns
// 4l .. 4l+3 of every 128.
template <FusedRnnWeights kW, int kH, typename Chunk, int G, int kI>
__device__ __forceinline__ void LoadUnitRows(const FusedRnnArgs& a, int j, int lane,
                                             Chunk (&w)[G][kI]) {
  using Weights = cluster_detail::WeightChunk<kW>;
#pragma unroll
  for (int q = 0; q < G; ++q) {
    const auto* row =
        reinterpret_cast<const Chunk*>(Weights::Base(a) + (static_cast<int64_t>(q) * kH + j) * kH);
#pragma unroll
    for (int i = 0; i < kI; ++i) w[q][i] = __ldg(row + lane + 32 * i);
  }
}

// FusedRnnXchgParts as a constant that device code may read.
template <FusedRnnCell kCell>
inline constexpr int kXchgParts = FusedRnnXchgParts(kCell);

// GRU reset_after=False's step for the cell of (sequence lane, unit j), its input projection in
// cell.x and h(t-1) of every unit in shared memory `hs`: r and z from h(t-1); then r * h(t-1) of
// every unit, which takes a second exchange (words `rh`, tagged `want` as h(t-1), gathered into
// shared memory `rhs`) and its own dot products, for n; then PublishCell (tag want + 1).
template <FusedRnnWeights kW, int kH, int kPairs, typename Cell, typename Chunk, int G, int kI>
__device__ __forceinline__ void GruBeforeStepAndPublish(const Chunk (&w)[G][kI], const float* hs,
                                                        FusedWord* rh, float* rhs, Cell& cell,
                                                        const FusedRnnArgs& a, FusedWord* out,
                                                        int B, int lane, int j, int s,
                                                        unsigned want, bool mine) {
  float gates[G];
#pragma unroll
  for (int q = 0; q < G; ++q) gates[q] = 0.0f;
  SumRows<kW, kH, 0, 2>(w, hs, B, lane, gates);
  float z = 0.0f;
  if (mine) {
    const float r = FusedSigmoid(cell.x[0] + gates[0]);
    z = FusedSigmoid(cell.x[1] + gates[1]);
    StoreFusedWord(rh + lane * kH + j, s < cell.len ? r * cell.h : 0.0f, want);
  }
  GatherFusedWords<kPairs>(rh, rhs, B * kH, want);
  __syncthreads();
  SumRows<kW, kH, 2, 3>(w, rhs, B, lane, gates);
  if (mine && s < cell.len) {
    const float n = tanhf(cell.x[2] + gates[2]);
    cell.h = (1.0f - z) * n + z * cell.h;
  }
  PublishCell<kH>(cell, a, out, lane, j, s, want + 1, mine);
}

// A step of the register kernels for the cell of (sequence lane, unit j), its input projection
// in cell.x and h(t-1) of every unit in `hs`, to its h(t) published (tag want + 1): the cell's
// G dot products and its update; GRU reset_after=False with its second exchange (rh, rhs:
// GruBeforeStepAndPublish).
template <FusedRnnCell kCell, FusedRnnWeights kW, int kH, int kPairs, typename Cell, typename Chunk,
          int G, int kI>
__device__ __forceinline__ void StepAndPublish(const Chunk (&w)[G][kI], const float* hs,
                                               FusedWord* rh, float* rhs, Cell& cell,
                                               const FusedRnnArgs& a, FusedWord* out, int B,
                                               int lane, int j, int s, unsigned want, bool mine) {
  if constexpr (kCell == FusedRnnCell::kGruBefore) {
    GruBeforeStepAndPublish<kW, kH, kPairs>(w, hs, rh, rhs, cell, a, out, B, lane, j, s, want,
                                            mine);
  } else {
    float gates[G];
#pragma unroll
    for (int q = 0; q < G; ++q) gates[q] = 0.0f;
    SumRows<kW, kH, 0, G>(w, hs, B, lane, gates);
    StepAndPublishCell<kCell, kH>(cell, gates, a, out, lane, j, s, want + 1, mine);
  }
}

template <FusedRnnCell kCell, int kH, FusedRnnWeights kW>
__global__ void __launch_bounds__(kFusedRegMaxThreads, 1) FusedRnnRegKernel(FusedRnnArgs a) {
  using Chunk = cluster_detail::WeightChunk<kW>;
  constexpr int G = kFusedGates<kCell>;
  constexpr int kI = kH / 128;  // chunks of 4 weights of a row a lane keeps
  static_assert(kH % 128 == 0);
  // Pairs of words a thread's gather has in flight at once: more where R leaves registers.
  constexpr int kGatherPairs = G * kI * sizeof(typename Chunk::Type) / 4 >= 128 ? 4 : 8;
  extern __shared__ float4 smem4[];
  // h(t-1) [2][B][kH] by step parity; reset_after=False: then r * h(t-1) [B][kH].
  float* hbufs = reinterpret_cast<float*>(smem4);
  // This block's direction (a.dirs of gridDim.x / a.dirs blocks each, or a.only_dir on all)
  // and group of sequences [b0, b0 + B) in it (a.groups of per_group blocks); ga is a for the
  // direction and group alone (its weights, sequences and exchange words).
  const int per_dir = a.only_dir < 0 ? gridDim.x / a.dirs : gridDim.x;
  const int dir = a.only_dir < 0 ? blockIdx.x / per_dir : a.only_dir;
  const int per_group = per_dir / a.groups, group = blockIdx.x % per_dir / per_group;
  const int seqs = (a.B + a.groups - 1) / a.groups, b0 = group * seqs;
  const int B = max(0, min(seqs, a.B - b0)), lane = threadIdx.x % 32;
  const int j = (blockIdx.x % per_group) * a.U + threadIdx.x / 32;
  FusedRnnArgs ga = a;
  NarrowFusedDirection<G>(&ga, dir);
  NarrowFusedArgs<G>(&ga, b0, B);
  ga.xchg += static_cast<int64_t>(dir * a.groups + group) * kXchgParts<kCell> * a.xchg_stride;
  typename Chunk::Type w[G][kI];
  LoadUnitRows<kW, kH>(ga, j, lane, w);
  // Every thread reads the tags' base: it changes only after every block has left.
  const unsigned base = __ldcg(&a.sync->base);
  // Lane b < B keeps sequence b's cell of unit j.
  const bool mine = lane < B;
  FusedCell<kCell> cell;
  if (mine) cell.Start(ga, lane, j);
  __syncthreads();
  if (mine) StoreFusedWord(ga.xchg + lane * kH + j, cell.h, base + 1);
  const int BH = B * kH, stride = a.xchg_stride;
  for (int s = 0; s < a.steps; ++s) {
    const FusedWord* in = ga.xchg + (s & 1) * stride;
    FusedWord* out = ga.xchg + ((s + 1) & 1) * stride;
    const unsigned want = base + s + 1;
    float* hs = hbufs + (s & 1) * BH;
    GatherFusedWords<kGatherPairs>(in, hs, BH, want);
    __syncthreads();
    // reset_after=False: r * h(t-1) by step parity after h's words, into hbufs[2].
    StepAndPublish<kCell, kW, kH, kGatherPairs>(w, hs, ga.xchg + (2 + (s & 1)) * stride,
                                                hbufs + 2 * BH, cell, ga, out, B, lane, j, s, want,
                                                mine);
  }
  if (mine) cell.Finish(ga, lane, j);
  LeaveFusedExchange(a.sync, base, a.steps);
}

// Before a layer of the stacked kernel overwrites ring block `out` at step s (its h(s - ring),
// tagged want + 1 - ring, which the layer above gathers at its step s - ring): warp 0 waits until
// every block of the layer above (`done`, one word each) has gathered it. *cleared (warp 0's)
// is the least tag they were all seen past, so that most steps read nothing.
__device__ __forceinline__ void WaitForLayerAbove(const unsigned* done, int blocks, int s,
                                                  unsigned want, unsigned* cleared) {
  constexpr int kRing = kFusedStackRing;
  if (threadIdx.x >= 32 || s < kRing) return;
  const unsigned need = want + 1 - kRing;
  if (static_cast<int>(*cleared - need) >= 0) return;
  unsigned ahead = ~0u;  // the least of the blocks' tags, less `need`
  for (int k = threadIdx.x; k < blocks; k += 32) {
    unsigned v;
    do {
      v = LoadFusedFlag(done + k);
    } while (static_cast<int>(v - need) < 0);
    ahead = min(ahead, v - need);
  }
  *cleared = need + __reduce_min_sync(0xffffffffu, ahead);
}

// The stacked register kernel (FusedRnnStackArgs in fused_rnn_kernel.h): layer 0's blocks run
// as FusedRnnRegKernel does, the others with each warp holding its unit's rows of W beside those
// of R and taking the lower layer's h(t) and its own h(t-1) in one gather a step; every layer's
// h in a ring of word blocks, each layer but the top one paced by the layer above.
template <FusedRnnCell kCell, int kH, FusedRnnWeights kW>
__global__ void __launch_bounds__(kFusedRegMaxThreads, 1)
    FusedRnnStackKernel(FusedRnnStackArgs sa) {
  constexpr FusedRnnWeights kFp32 = FusedRnnWeights::kFp32;
  using Chunk = cluster_detail::WeightChunk<kW>;
  constexpr int G = kFusedGates<kCell>;
  constexpr int kI = kH / 128;
  constexpr int kRing = kFusedStackRing;
  static_assert(kH % 128 == 0);
  extern __shared__ float4 smem4[];
  // h(t-1) [2][B][kH] by step parity; past layer 0, then the lower layer's h(t) [2][B][kH];
  // GRU reset_after=False: then r * h(t-1) [B][kH] (rhs, in every layer), its words by step
  // parity after the layer's ring.
  float* hbufs = reinterpret_cast<float*>(smem4);
  const int per_layer = gridDim.x / sa.layers, layer = blockIdx.x / per_layer;
  const int block = blockIdx.x % per_layer;
  FusedRnnArgs a = sa.a[0];
#pragma unroll
  for (int l = 1; l < kFusedStackMaxLayers; ++l) {
    if (layer == l) a = sa.a[l];
  }
  const int B = a.B, lane = threadIdx.x % 32;
  const int j = block * a.U + threadIdx.x / 32;
  typename Chunk::Type w[G][kI];
  LoadUnitRows<kW, kH>(a, j, lane, w);
  const unsigned base = __ldcg(&sa.a[0].sync->base);
  const bool mine = lane < B;
  const int BH = B * kH, stride = a.xchg_stride;
  float* rhs = hbufs + 4 * BH;
  const bool top = layer + 1 == sa.layers;
  // The progress words of the layer above (to wait on) and of this layer's blocks (to set).
  const unsigned* above = top ? nullptr : sa.done + layer * per_layer;
  unsigned* mine_done = layer > 0 ? sa.done + (layer - 1) * per_layer + block : nullptr;
  unsigned cleared = base;  // warp 0: WaitForLayerAbove
  if (layer == 0) {
    FusedCell<kCell> cell;
    if (mine) cell.Start(a, lane, j);
    __syncthreads();
    if (mine) StoreFusedWord(a.xchg + lane * kH + j, cell.h, base + 1);
    for (int s = 0; s < a.steps; ++s) {
      const FusedWord* in = a.xchg + (s % kRing) * stride;
      FusedWord* out = a.xchg + ((s + 1) % kRing) * stride;
      const unsigned want = base + s + 1;
      float* hs = hbufs + (s & 1) * BH;
      GatherFusedWords<4>(in, hs, BH, want);
      if (!top) WaitForLayerAbove(above, per_layer, s, want, &cleared);
      __syncthreads();
      StepAndPublish<kCell, kW, kH, 4>(w, hs, a.xchg + (kRing + (s & 1)) * stride, rhs, cell, a,
                                       out, B, lane, j, s, want, mine);
    }
    if (mine) cell.Finish(a, lane, j);
  } else {
    const float* W = sa.W[1];
    const float* bias_in = sa.bias[1];
    const FusedWord* below = sa.a[0].xchg;
#pragma unroll
    for (int l = 2; l < kFusedStackMaxLayers; ++l) {
      if (layer == l) {
        W = sa.W[l];
        bias_in = sa.bias[l];
        below = sa.a[l - 1].xchg;
      }
    }
    float4 wx[G][kI];  // W in FP32 whatever R's precision, read from W^T [kH][G * kH] once
#pragma unroll
    for (int q = 0; q < G; ++q) {
      const float* col = W + q * kH + j;
#pragma unroll
      for (int i = 0; i < kI; ++i) {
        const int64_t k = 4 * (lane + 32 * i);
        wx[q][i] = make_float4(__ldg(col + k * G * kH), __ldg(col + (k + 1) * G * kH),
                               __ldg(col + (k + 2) * G * kH), __ldg(col + (k + 3) * G * kH));
      }
    }
    FusedCell<kCell, false> cell;
    float bias[G] = {};
    if (mine) {
      cell.Start(a, lane, j);
#pragma unroll
      for (int q = 0; q < G; ++q) bias[q] = bias_in[q * kH + j];
    }
    __syncthreads();
    if (mine) StoreFusedWord(a.xchg + lane * kH + j, cell.h, base + 1);
    for (int s = 0; s < a.steps; ++s) {
      const FusedWord* in = a.xchg + (s % kRing) * stride;
      FusedWord* out = a.xchg + ((s + 1) % kRing) * stride;
      const unsigned want = base + s + 1;
      float* hs = hbufs + (s & 1) * BH;
      float* xs = hbufs + (2 + (s & 1)) * BH;
      // Its own h(t-1) and the lower layer's h(t) (tagged one step on).
      GatherFusedWords<4, true>(in, hs, BH, want, below + ((s + 1) % kRing) * stride, xs, want + 1);
      if (!top) WaitForLayerAbove(above, per_layer, s, want, &cleared);
      __syncthreads();
      if (threadIdx.x == 0) StoreFusedFlag(mine_done, want + 1);
      float xg[G];
#pragma unroll
      for (int q = 0; q < G; ++q) xg[q] = 0.0f;
      SumRows<kFp32, kH, 0, G>(wx, xs, B, lane, xg);
#pragma unroll
      for (int q = 0; q < G; ++q) cell.x[q] = xg[q] + bias[q];
      StepAndPublish<kCell, kW, kH, 4>(w, hs, a.xchg + (kRing + (s & 1)) * stride, rhs, cell, a,
                                       out, B, lane, j, s, want, mine);
    }
    if (mine) cell.Finish(a, lane, j);
  }
  LeaveFusedExchange(sa.a[0].sync, base, a.steps);
}

// The kernels of this file as families, for one dispatch over (cell, H, weights): Get<kCell, kH,
// kW>() is an instance, kMaxH the widest compiled, kGruBefore whether GRU reset_after=False
// (exact FP32 only) is compiled.
struct RegisterFamily {
  using Fn = void (*)(FusedRnnArgs);
  static constexpr int kMaxH = 1024;
  static constexpr bool kGruBefore = true;
  template <FusedRnnCell kCell, int kH, FusedRnnWeights kW>
  static Fn Get() {
    return FusedRnnRegKernel<kCell, kH, kW>;
  }
};

struct StackFamily {
  using Fn = void (*)(FusedRnnStackArgs);
  static constexpr int kMaxH = 512;  // layer 1's W and R in registers
  static constexpr bool kGruBefore = true;
  template <FusedRnnCell kCell, int kH, FusedRnnWeights kW>
  static Fn Get() {
    return FusedRnnStackKernel<kCell, kH, kW>;
  }
};

template <typename F, FusedRnnCell kCell, FusedRnnWeights kW>
typename F::Fn OfWidth(int H) {
  switch (H) {
    case 128:
      return F::template Get<kCell, 128, kW>();
    case 256:
      return F::template Get<kCell, 256, kW>();
    case 512:
      return F::template Get<kCell, 512, kW>();
    case 1024:
      if constexpr (F::kMaxH >= 1024) return F::template Get<kCell, 1024, kW>();
      return nullptr;
    default:
      return nullptr;
  }
}

template <typename F, FusedRnnCell kCell>
typename F::Fn OfWeights(int H, FusedRnnWeights weights) {
  switch (weights) {
    case FusedRnnWeights::kBf16:
      return OfWidth<F, kCell, FusedRnnWeights::kBf16>(H);
    case FusedRnnWeights::kFp16:
      return OfWidth<F, kCell, FusedRnnWeights::kFp16>(H);
    default:
      return OfWidth<F, kCell, FusedRnnWeights::kFp32>(H);
  }
}

template <typename F>
typename F::Fn KernelFor(FusedRnnCell cell, int H, FusedRnnWeights weights) {
  switch (cell) {
    case FusedRnnCell::kLstm:
      return OfWeights<F, FusedRnnCell::kLstm>(H, weights);
    case FusedRnnCell::kGru:
      return OfWeights<F, FusedRnnCell::kGru>(H, weights);
    case FusedRnnCell::kGruBefore:
      if constexpr (F::kGruBefore) {
        if (weights == FusedRnnWeights::kFp32) {
          return OfWidth<F, FusedRnnCell::kGruBefore, FusedRnnWeights::kFp32>(H);
        }
      }
      return nullptr;
  }
  return nullptr;
}

using Kernel = RegisterFamily::Fn;
using StackKernel = StackFamily::Fn;

Kernel KernelFor(FusedRnnCell cell, int H, FusedRnnWeights weights) {
  return KernelFor<RegisterFamily>(cell, H, weights);
}

StackKernel StackKernelFor(FusedRnnCell cell, int H, FusedRnnWeights weights) {
  return KernelFor<StackFamily>(cell, H, weights);
}

// A kernel's shared-memory limit raised to `smem`; how many blocks of U warps an SM runs.
template <typename Fn>
cudaError_t ConfigureKernel(Fn k, size_t smem) {
  return k ? RaiseDynamicSmemLimit(k, smem) : cudaErrorInvalidValue;
}

template <typename Fn>
cudaError_t MaxBlocksPerSm(Fn k, int U, size_t smem, int* blocks) {
  if (!k) return cudaErrorInvalidValue;
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, k, 32 * U, smem);
}

}  // namespace

bool FusedRnnRegCompiled(int H) {
  return KernelFor(FusedRnnCell::kLstm, H, FusedRnnWeights::kFp32) != nullptr;
}

cudaError_t ConfigureFusedRnnRegKernel(FusedRnnCell cell, int H, FusedRnnWeights weights,
                                       size_t smem) {
  return ConfigureKernel(KernelFor(cell, H, weights), smem);
}

cudaError_t MaxFusedRnnRegBlocksPerSm(FusedRnnCell cell, int H, FusedRnnWeights weights, int U,
                                      size_t smem, int* blocks) {
  return MaxBlocksPerSm(KernelFor(cell, H, weights), U, smem, blocks);
}

cudaError_t LaunchFusedRnnRegKernel(const FusedRnnArgs& args, int blocks, size_t smem,
                                    cudaStream_t stream) {
  Kernel k = KernelFor(args.cell, args.H, args.weights);
  const int seqs = args.groups < 1 ? 0 : (args.B + args.groups - 1) / args.groups;
  if (!k || args.xchg == nullptr || args.sync == nullptr || args.B > 32 || seqs < 1 ||
      args.xchg_stride < seqs * args.H || 32 * args.U > kFusedRegMaxThreads ||
      blocks * args.U != args.H || (args.dirs != 1 && args.dirs != 2) ||
      args.only_dir >= args.dirs || args.reverse) {
    return cudaErrorInvalidValue;
  }
  FusedRnnArgs copy = args;
  void* params[] = {&copy};
  const int dirs = args.only_dir < 0 ? args.dirs : 1;
  return cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(k),
                                     dim3(blocks * args.groups * dirs), dim3(32 * args.U), params,
                                     smem, stream);
}

bool FusedRnnStackCompiled(FusedRnnCell cell, int H, FusedRnnWeights weights) {
  return StackKernelFor(cell, H, weights) != nullptr;
}

cudaError_t ConfigureFusedRnnStackKernel(FusedRnnCell cell, int H, FusedRnnWeights weights,
                                         size_t smem) {
  return ConfigureKernel(StackKernelFor(cell, H, weights), smem);
}

cudaError_t MaxFusedRnnStackBlocksPerSm(FusedRnnCell cell, int H, FusedRnnWeights weights, int U,
                                        size_t smem, int* blocks) {
  return MaxBlocksPerSm(StackKernelFor(cell, H, weights), U, smem, blocks);
}

cudaError_t LaunchFusedRnnStackKernel(const FusedRnnStackArgs& args, size_t smem,
                                      cudaStream_t stream) {
  const FusedRnnArgs& a = args.a[0];
  StackKernel k = StackKernelFor(a.cell, a.H, a.weights);
  if (!k || args.layers < 2 || args.layers > kFusedStackMaxLayers || a.sync == nullptr ||
      args.done == nullptr || a.B < 1 || a.B > 32 || a.xchg_stride < a.B * a.H || a.U < 1 ||
      32 * a.U > kFusedRegMaxThreads || a.H % a.U != 0) {
    return cudaErrorInvalidValue;
  }
  for (int l = 0; l < args.layers; ++l) {
    const FusedRnnArgs& b = args.a[l];
    if (b.cell != a.cell || b.weights != a.weights || b.H != a.H || b.B != a.B || b.T != a.T ||
        b.U != a.U || b.steps != a.steps || b.xchg_stride != a.xchg_stride || b.xchg == nullptr ||
        (l > 0 && (args.W[l] == nullptr || args.bias[l] == nullptr))) {
      return cudaErrorInvalidValue;
    }
  }
  FusedRnnStackArgs copy = args;
  void* params[] = {&copy};
  return cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(k),
                                     dim3(args.layers * (a.H / a.U)), dim3(32 * a.U), params, smem,
                                     stream);
}

}  // namespace rnnserve::engine::cuda
