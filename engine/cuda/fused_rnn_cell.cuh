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

// Narrows *a to sequences [b0, b0 + B) of its batch (G gates a unit): the lengths, states,
// input projection and outputs from sequence b0 on, B of them (kernels that split a batch into
// groups of sequences on blocks of their own).
template <int G>
__device__ __forceinline__ void NarrowFusedArgs(FusedRnnArgs* a, int b0, int B) {
  a->B = B;
  a->lengths += b0;
  if (a->h0) a->h0 += b0 * a->H;
  if (a->c0) a->c0 += b0 * a->H;
  a->xproj += static_cast<int64_t>(b0) * a->T * a->dirs * G * a->H;
  if (a->y) a->y += static_cast<int64_t>(b0) * a->T * a->dirs * a->H;
  a->hy += b0 * a->H;
  if (a->cy) a->cy += b0 * a->H;
}

// Narrows *a (of FusedRnnArgs::dirs directions, before NarrowFusedArgs) to direction d: its rows
// of R, its bRn and states, its columns of the input projection and of y; the second direction
// runs in reverse.
template <int G>
__device__ __forceinline__ void NarrowFusedDirection(FusedRnnArgs* a, int d) {
  if (d == 0) return;
  const int64_t rows = static_cast<int64_t>(G) * a->H, states = static_cast<int64_t>(a->B) * a->H;
  if (a->R) a->R += d * rows * a->H;
  if (a->R16) a->R16 += d * rows * a->H;
  if (a->bRn) a->bRn += d * a->H;
  if (a->h0) a->h0 += d * states;
  if (a->c0) a->c0 += d * states;
  a->hy += d * states;
  if (a->cy) a->cy += d * states;
  a->xproj += d * rows;
  if (a->y) a->y += d * a->H;
  a->reverse = true;
}

// One (sequence b, unit j) cell of the grid and register kernels (one forward direction, the
// layouts of FusedRnnArgs): its state in registers and the input projection of its next step,
// loaded before the kernel waits for h(t-1). kProjected false: the kernel computes x itself
// (the upper layer of the stacked register kernel) and FusedRnnArgs::xproj is not read.
template <FusedRnnCell kCell, bool kProjected = true>
struct FusedCell {
  static constexpr int G = kFusedGates<kCell>;
  float h = 0.0f, c = 0.0f, bRn = 0.0f;
  float x[G] = {};
  int len = 0;

  // Before step 0: the length, h0, c0, the GRU's bRn and step 0's input projection.
  __device__ __forceinline__ void Start(const FusedRnnArgs& a, int b, int j) {
    len = a.lengths[b];
    h = a.h0 ? a.h0[b * a.H + j] : 0.0f;
    c = a.c0 ? a.c0[b * a.H + j] : 0.0f;
    if constexpr (kCell == FusedRnnCell::kGru) bRn = a.bRn[j];
    if constexpr (kProjected) LoadProjection(a, b, j, a.reverse ? len - 1 : 0);
  }
  // After step s (h is h(s)): its output, zero past the length (at time s; reverse: step s is
  // time len - 1 - s), and the next step's projection.
  __device__ __forceinline__ void Emit(const FusedRnnArgs& a, int b, int j, int s) {
    if (a.y) {
      const int t = a.reverse && s < len ? len - 1 - s : s;
      a.y[(static_cast<int64_t>(b) * a.T + t) * a.dirs * a.H + j] = s < len ? h : 0.0f;
    }
    if constexpr (kProjected) {
      if (s + 1 < len) LoadProjection(a, b, j, a.reverse ? len - 2 - s : s + 1);
    }
  }
  // After the last step: hy, cy and zero outputs for the steps past the longest length.
  __device__ __forceinline__ void Finish(const FusedRnnArgs& a, int b, int j) const {
    a.hy[b * a.H + j] = h;
    if (a.cy) a.cy[b * a.H + j] = c;
    if (a.y) {
      for (int t = a.steps; t < a.T; ++t) {
        a.y[(static_cast<int64_t>(b) * a.T + t) * a.dirs * a.H + j] = 0.0f;
      }
    }
  }

 private:
  __device__ __forceinline__ void LoadProjection(const FusedRnnArgs& a, int b, int j, int t) {
    const float* xp = a.xproj + (static_cast<int64_t>(b) * a.T + t) * a.dirs * G * a.H + j;
#pragma unroll
    for (int q = 0; q < G; ++q) x[q] = xp[q * a.H];
  }
};

}  // namespace rnnserve::engine::cuda
