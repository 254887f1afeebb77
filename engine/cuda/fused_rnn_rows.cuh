#pragma once

// The gate rows' dot products of the register kernels (fused_rnn_reg_kernel.cu: a warp a unit;
// fused_rnn_small_kernel.cu: kLanes lanes a unit), R's rows held in registers. CUDA only.

#include "engine/cuda/fused_rnn_cluster.cuh"
#include "engine/cuda/fused_rnn_kernel.h"

namespace rnnserve::engine::cuda {

// The dot products of gate rows kQ0 .. kQ1 - 1 of a unit with sequences b0 .. b0 + kN - 1 of hs
// ([B][kH] in shared memory; kN at once, for overlap), over the kLanes lanes that hold the
// unit's rows (lane `lane` of them keeps w[q][i] = columns 4 (lane + kLanes i) .. + 3 of row q),
// each summed across those lanes by shuffles; lane b0 + n takes sequence b0 + n's into
// gates[kQ0 .. kQ1 - 1]. Every lane of the warp takes part (the shuffles).
template <int kN, FusedRnnWeights kW, int kH, int kLanes, int kQ0, int kQ1, typename Chunk, int G,
          int kI>
__device__ __forceinline__ void SumLaneRows(const Chunk (&w)[G][kI], const float* hs, int b0,
                                            int lane, float (&gates)[G]) {
  float acc[kN][G];
#pragma unroll
  for (int n = 0; n < kN; ++n) {
#pragma unroll
    for (int q = kQ0; q < kQ1; ++q) acc[n][q] = 0.0f;
  }
#pragma unroll
  for (int i = 0; i < kI; ++i) {
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      const float4 hv = reinterpret_cast<const float4*>(hs + (b0 + n) * kH)[lane + kLanes * i];
#pragma unroll
      for (int q = kQ0; q < kQ1; ++q)
        acc[n][q] = cluster_detail::DotChunk<kW>(w[q][i], hv, acc[n][q]);
    }
  }
#pragma unroll
  for (int n = 0; n < kN; ++n) {
#pragma unroll
    for (int q = kQ0; q < kQ1; ++q) {
#pragma unroll
      for (int off = kLanes / 2; off > 0; off >>= 1) {
        acc[n][q] += __shfl_xor_sync(0xffffffffu, acc[n][q], off);
      }
      if (lane == b0 + n) gates[q] = acc[n][q];
    }
  }
}

// SumLaneRows for every one of the B sequences of hs, two at a time.
template <FusedRnnWeights kW, int kH, int kLanes, int kQ0, int kQ1, typename Chunk, int G, int kI>
__device__ __forceinline__ void SumLaneRowsAll(const Chunk (&w)[G][kI], const float* hs, int B,
                                               int lane, float (&gates)[G]) {
  int b = 0;
  for (; b + 2 <= B; b += 2) SumLaneRows<2, kW, kH, kLanes, kQ0, kQ1>(w, hs, b, lane, gates);
  if (b < B) SumLaneRows<1, kW, kH, kLanes, kQ0, kQ1>(w, hs, b, lane, gates);
}

}  // namespace rnnserve::engine::cuda
