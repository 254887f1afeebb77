#pragma once

// The cells of FusedRnn's kernels (fused_rnn.h), one hidden unit and one step at a time, in
// plain FP32 with precise expf / tanhf and each formula in the order of the CPU engine's gate
// pass (engine/cpu/gate_kernels.h: lstm_cell; gru_candidate, gru_blend). CUDA only.

#include "engine/cuda/fused_rnn_kernel.h"

namespace rnnserve::engine::cuda {

// FusedRnnGates as a constant that device code may read.
template <FusedRnnCell kCell>
inline constexpr int kFusedGates = FusedRnnGates(kCell);

__device__ __forceinline__ float FusedSigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// The unit's new h from its gates' input projections x[G] (biases folded in) and recurrent dot
// products g[G], gates in the IR's order, and its h(t-1). LSTM: c is the cell state, updated;
// bRn unused. GRU (reset_after): bRn is the n gate's recurrent bias; c unused.
template <FusedRnnCell kCell>
__device__ __forceinline__ float FusedCellStep(const float* x, const float* g, float h, float& c,
                                               float bRn) {
  if constexpr (kCell == FusedRnnCell::kLstm) {
    const float ig = FusedSigmoid(x[0] + g[0]);
    const float fg = FusedSigmoid(x[1] + g[1]);
    const float cg = tanhf(x[2] + g[2]);
    const float og = FusedSigmoid(x[3] + g[3]);
    c = fg * c + ig * cg;
    return og * tanhf(c);
  } else {
    const float r = FusedSigmoid(x[0] + g[0]);
    const float z = FusedSigmoid(x[1] + g[1]);
    const float n = tanhf(x[2] + r * (g[2] + bRn));
    return (1.0f - z) * n + z * h;
  }
}

}  // namespace rnnserve::engine::cuda
