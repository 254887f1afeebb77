#pragma once

// The element-wise half of a recurrent step (the "gate pass"): bias and input-projection adds,
// clipping, the gate activations and the cell and state updates, over one thread's slice of
// units. Built once per kernel set (AVX-512, AVX2+FMA, the build's baseline) with that set's
// target attributes, like the panel GEMM, so that a binary built for a portable baseline runs
// the widest vectors the CPU has; the set is the one PanelGemm runs (ActiveCpuKernelSet).
//
// sigmoid and tanh are vectorised with the same approximations Eigen's packet math uses (the
// Cephes exp polynomial; the 13/6 rational tanh clamped at +-7.9988), a few ulp from std::exp
// and std::tanh. Every kernel set computes them with the same operations, so the sets agree
// with one another up to FMA contraction.

#include <cstdint>

#include "engine/cpu/panel_gemm.h"
#include "engine/ir.h"

namespace rnnserve::engine::cpu {

struct GateKernels {
  // x = act(x) over n values (any activation; the common ones vectorised, the rest scalar).
  void (*activate)(const Activation& a, float* x, int n);
  // x = clamp(x, -clip, clip); nothing when clip <= 0.
  void (*clip)(float* x, int n, float clip);
  // x += y
  void (*add)(float* x, const float* y, int n);
  // x += a * b
  void (*add_mul)(float* x, const float* a, const float* b, int n);
  // out = a * b
  void (*mul)(float* out, const float* a, const float* b, int n);
  // out = 1 - a
  void (*one_minus)(float* out, const float* a, int n);
  // c = f * c + i * g (the LSTM cell update)
  void (*lstm_cell)(float* c, const float* i, const float* f, const float* g, int n);
  // out = (1 - z) * cand + z * h (the GRU state update; out may alias h or cand)
  void (*gru_blend)(float* out, const float* z, const float* cand, const float* h, int n);
  // cand = x + r * (cand + b) (the GRU reset_after candidate before its activation)
  void (*gru_candidate)(float* cand, const float* x, const float* r, const float* b, int n);
  // One row's whole LSTM update with sigmoid gates and tanh cell and output activations, no
  // clip, peepholes or coupled gates, in one pass in registers: z = g + xp (g [4n] the
  // recurrent product, xp [4n] the input projection with biases, gates i, f, g, o),
  // c = s(z_f) c + s(z_i) tanh(z_g), h = s(z_o) tanh(c).
  void (*lstm_row)(const float* g, const float* xp, float* c, float* h, int n);
  // One row's whole GRU reset_after update with sigmoid gates and a tanh candidate, no clip:
  // r, z = s(g + xp) (first 2n), n = tanh(xp_n + r * (g_n + b)), h = (1 - z) n + z h_prev.
  void (*gru_row)(const float* g, const float* xp, const float* b, const float* h_prev, float* h,
                  int n);
  // Softmax over each of `rows` rows of `cols` values, stable (the row's max subtracted first);
  // the Dense and Conv1D layers' softmax activation.
  void (*softmax_rows)(float* x, int64_t rows, int64_t cols);
};

// The kernels of one set; GateKernelsFor(ActiveCpuKernelSet()) is what the engine runs.
const GateKernels& GateKernelsFor(CpuKernelSet set);
// The active set's kernels (the plain set when RNNSERVE_CPU_KERNELS names one this CPU lacks:
// the engine then refuses to compile models, as for the panel GEMM).
const GateKernels& ActiveGateKernels();

}  // namespace rnnserve::engine::cpu
