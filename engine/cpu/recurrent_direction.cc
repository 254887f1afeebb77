// The step loop of one direction of a recurrent layer: input projection, then per step the
// recurrent matmul of each thread's unit slice and its fused pointwise update.

#include <algorithm>
#include <numeric>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "engine/cpu/activation.h"
#include "engine/cpu/panel_gemm.h"
#include "engine/cpu/phase_runner.h"
#include "engine/cpu/recurrent.h"
#include "engine/cpu/recurrent_internal.h"

namespace rnnserve::engine::cpu {
namespace {

using Arr = Eigen::Map<Eigen::ArrayXf>;

constexpr int64_t kMinSharedStepWork = 64 * 1024;
using Stride = Eigen::OuterStride<>;

// Vectorised, in place over n values. sigmoid and tanh keep within a few ulp of std::exp and
// std::tanh (Eigen's packet exp and tanh), far inside the 1e-5 relative the engine promises.
void ApplyActivation(const Activation& a, float* x, int n) {
  Arr v(x, n);
  switch (a.kind) {
    case ActivationKind::kLinear:
      return;
    case ActivationKind::kSigmoid:
      v = (1.0f + (-v).exp()).inverse();
      return;
    case ActivationKind::kTanh:
      v = v.tanh();
      return;
    case ActivationKind::kRelu:
      v = v.max(0.0f);
      return;
    case ActivationKind::kHardSigmoid:
      v = (a.alpha * v + a.beta).max(0.0f).min(1.0f);
      return;
    default:
      for (int i = 0; i < n; ++i) x[i] = Activate(a, x[i]);
  }
}

void ClipInPlace(float* x, int n, float clip) {
  if (clip <= 0.0f) return;
  Arr v(x, n);
  v = v.max(-clip).min(clip);
}

}  // namespace

void RecurrentKernel::RunDirection(int d, const Tensor& x, absl::Span<const int32_t> lengths,
                                   const uint8_t* step_mask, const float* h0, const float* c0,
                                   float* seq_out, float* h_out, float* c_out) {
  const RecurrentDirection& dir = spec_.directions[d];
  const Packed& pk = packed_[d];
  Scratch& s = *scratch_;
  const int64_t B = x.dim(0), T = x.dim(1), I = x.dim(2);
  const int H = spec_.hidden_size, Hp = spec_.output_size(), G = spec_.gates();
  const bool lstm = spec_.cell == CellType::kLstm;

  // Rows of the valid steps: sequence b's steps are rows offset[b] .. offset[b] + len - 1.
  int64_t rows = 0;
  bool full = true;
  Reserve(B, 0);
  for (int64_t b = 0; b < B; ++b) {
    s.offset[b] = rows;
    rows += lengths[b];
    full &= lengths[b] == T;
  }
  Reserve(B, rows);

  // The valid steps of every sequence, packed contiguous when some sequence is short; each
  // thread projects them onto its own gate slice inside the parallel region below.
  const float* xin = x.f32();
  if (!full && rows > 0) {
    for (int64_t b = 0; b < B; ++b) {
      std::copy_n(x.f32() + b * T * I, lengths[b] * I, s.xpack.data() + s.offset[b] * I);
    }
    xin = s.xpack.data();
  }

  // Sequences sorted by length, longest first: the ones still running at step s are a prefix.
  std::iota(s.order.begin(), s.order.begin() + B, 0);
  std::stable_sort(s.order.begin(), s.order.begin() + B,
                   [&](int a, int b) { return lengths[a] > lengths[b]; });
  for (int64_t k = 0; k < B; ++k) s.len[k] = lengths[s.order[k]];
  const int64_t max_len = B > 0 ? s.len[0] : 0;
  s.active.assign(max_len, 0);
  {
    int64_t n = B;
    for (int64_t st = 0; st < max_len; ++st) {
      while (n > 0 && s.len[n - 1] <= st) --n;
      s.active[st] = static_cast<int>(n);
    }
  }
  if (step_mask) {
    s.first_valid.assign(B, 0);
    for (int64_t k = 0; k < B; ++k) {
      int64_t st = 0;
      while (st < s.len[k] && !step_mask[s.order[k] * T + (dir.reverse ? s.len[k] - 1 - st : st)]) {
        ++st;
      }
      s.first_valid[k] = st;
    }
  }
  for (int64_t k = 0; k < B; ++k) {
    const int b = s.order[k];
    float* h = s.h[0].data() + k * Hp;
    if (h0) {
      std::copy_n(h0 + b * Hp, Hp, h);
    } else {
      std::fill_n(h, Hp, 0.0f);
    }
    if (lstm) {
      float* c = s.c.data() + k * H;
      if (c0) {
        std::copy_n(c0 + b * H, H, c);
      } else {
        std::fill_n(c, H, 0.0f);
      }
    }
  }

  const bool zero_masked = spec_.masking == MaskSemantics::kKeras && spec_.zero_output_for_mask;
  const float clip = spec_.clip;
  const float* peep = dir.peephole.empty() ? nullptr : dir.peephole.data();

  // Position in the sequence output of sorted row k's step st.
  auto out_pos = [&](int64_t k, int64_t st) -> int64_t {
    const int64_t len = s.len[k];
    if (dir.outputs_in_processing_order) return (T - len) + st;
    return dir.reverse ? len - 1 - st : st;
  };
  auto time_of = [&](int64_t k, int64_t st) -> int64_t {
    return dir.reverse ? s.len[k] - 1 - st : st;
  };
  // True when sorted row k's step st is masked inside its length (Keras step masks).
  auto masked = [&](int64_t k, int64_t st) -> bool {
    return step_mask && !step_mask[s.order[k] * T + time_of(k, st)];
  };
  // Writes h (the thread's slice [a, a + m) of row k) to the sequence output.
  auto emit = [&](int64_t k, int64_t st, const float* h, int a, int m, bool was_masked) {
    if (!seq_out) return;
    float* dst = seq_out + (s.order[k] * T + out_pos(k, st)) * Hp + a;
    // Keras: a masked step repeats the last output, which is zero before the first valid step.
    if (was_masked && (zero_masked || st < s.first_valid[k])) {
      std::fill_n(dst, m, 0.0f);
    } else {
      std::copy_n(h, m, dst);
    }
  };

  // The work of a run is a sequence of phases: the input projection, then per step the main
  // matmul with its pointwise update, GRU reset_after=false's n gate and LSTM projection. Each
  // phase has one task per unit slice; a phase starts when every task of the previous one is
  // done. Threads take their own slice first and any slice left over, so a thread the OS has
  // descheduled does not stall the others.
  const bool gru_rb = spec_.cell == CellType::kGru && !spec_.reset_after;
  enum PhaseKind { kMain, kGruN, kProjection };
  std::vector<PhaseKind> kinds = {kMain};
  if (gru_rb) kinds.push_back(kGruN);
  if (spec_.proj_size > 0) kinds.push_back(kProjection);
  const int per_step = static_cast<int>(kinds.size());
  // A step too small to share runs on one thread, which takes every slice in turn: below
  // ~64K multiply-adds per step the hand-off between threads costs more than the work it
  // splits (an H=32 LSTM at B=1 has 4K; H=128 has 64K and is faster on two threads).
  const int64_t step_work = B * G * static_cast<int64_t>(H) * Hp;
  const int threads = step_work >= kMinSharedStepWork ? num_threads_ : 1;
  PhaseRunner runner(num_threads_, 1 + max_len * per_step);

  auto task = [&](int tid, int64_t phase) {
    const int u0 = unit_begin_[tid], nu = unit_begin_[tid + 1] - u0;
    const int p0 = proj_begin_[tid], np = proj_begin_[tid + 1] - p0;
    const int Gn = G * nu;
    float* gates = s.gates[tid].data();  // [n, G*nu] this slice, gate-major
    float* xproj = s.xproj[tid].data();  // [rows, G*nu] this slice, biases folded in
    const Packed::Slice& sl = pk.slices[tid];
    if (phase == 0) {
      // Input projection of every valid step onto this slice's gates: one GEMM.
      if (nu > 0 && rows > 0) {
        PanelGemm(xin, I, rows, static_cast<int>(I), sl.W.data(), Gn, xproj, Gn);
        for (int64_t r = 0; r < rows; ++r) {
          Arr(xproj + r * Gn, Gn) += Eigen::Map<const Eigen::ArrayXf>(sl.bias.data(), Gn);
        }
      }
      return;
    }
    const int64_t st = (phase - 1) / per_step;
    const PhaseKind kind = kinds[(phase - 1) % per_step];
    const int n = s.active[st];
    const float* hp = s.h[st & 1].data();  // [n, H'] state before the step
    float* hn = s.h[(st + 1) & 1].data();  // [n, H'] state after the step
    if (kind == kMain) {
      // [n, G*nu] = h [n, H'] . R_slice^T (GRU reset_after=false: the r and z columns only).
      if (nu > 0) {
        PanelGemm(hp, Hp, n, Hp, sl.R.data(), gru_rb ? 2 * nu : Gn, gates, Gn, st & 1);
      }
      for (int64_t k = 0; k < n && nu > 0; ++k) {
        float* g = gates + k * G * nu;
        const float* xp = xproj + (s.offset[s.order[k]] + time_of(k, st)) * Gn;
        const bool skip = masked(k, st);
        if (spec_.cell == CellType::kLstm) {
          if (skip) {
            if (spec_.proj_size == 0) {
              std::copy_n(hp + k * Hp + u0, nu, hn + k * Hp + u0);
              emit(k, st, hn + k * Hp + u0, u0, nu, true);
            }
            continue;
          }
          float* c = s.c.data() + k * H + u0;
          float *zi = g, *zf = g + nu, *zc = g + 2 * nu, *zo = g + 3 * nu;
          for (int q = 0; q < 4; ++q)
            Arr(g + q * nu, nu) += Eigen::Map<const Eigen::ArrayXf>(xp + q * nu, nu);
          if (peep) {
            Eigen::Map<const Eigen::ArrayXf> C(c, nu);
            Arr(zi, nu) += Eigen::Map<const Eigen::ArrayXf>(peep + u0, nu) * C;
            Arr(zf, nu) += Eigen::Map<const Eigen::ArrayXf>(peep + H + u0, nu) * C;
          }
          ClipInPlace(g, peep ? 3 * nu : 4 * nu, clip);  // zo waits for its peephole
          ApplyActivation(dir.f, zi, nu);
          if (spec_.input_forget) {
            Arr(zf, nu) = 1.0f - Arr(zi, nu);
          } else {
            ApplyActivation(dir.f, zf, nu);
          }
          ApplyActivation(dir.g, zc, nu);
          Arr(c, nu) = Arr(zf, nu) * Arr(c, nu) + Arr(zi, nu) * Arr(zc, nu);
          if (peep) {
            Arr(zo, nu) += Eigen::Map<const Eigen::ArrayXf>(peep + 2 * H + u0, nu) * Arr(c, nu);
            ClipInPlace(zo, nu, clip);
          }
          ApplyActivation(dir.f, zo, nu);
          std::copy_n(c, nu, zc);  // zc now holds h(c)
          ApplyActivation(dir.h, zc, nu);
          float* hout = spec_.proj_size > 0 ? s.shared.data() + k * H + u0 : hn + k * Hp + u0;
          Arr(hout, nu) = Arr(zo, nu) * Arr(zc, nu);
          if (spec_.proj_size == 0) emit(k, st, hout, u0, nu, false);
        } else if (spec_.cell == CellType::kGru) {
          const float* hk = hp + k * Hp + u0;
          if (spec_.reset_after) {
            if (skip) {
              std::copy_n(hk, nu, hn + k * Hp + u0);
              emit(k, st, hn + k * Hp + u0, u0, nu, true);
              continue;
            }
            float *r = g, *z = g + nu, *nn = g + 2 * nu;
            Arr(r, nu) += Eigen::Map<const Eigen::ArrayXf>(xp, nu);
            Arr(z, nu) += Eigen::Map<const Eigen::ArrayXf>(xp + nu, nu);
            ClipInPlace(g, 2 * nu, clip);
            ApplyActivation(dir.f, g, 2 * nu);
            Arr(nn, nu) =
                Eigen::Map<const Eigen::ArrayXf>(xp + 2 * nu, nu) +
                Arr(r, nu) * (Arr(nn, nu) + Eigen::Map<const Eigen::ArrayXf>(sl.bRn.data(), nu));
            ClipInPlace(nn, nu, clip);
            ApplyActivation(dir.g, nn, nu);
            Eigen::Map<const Eigen::ArrayXf> hprev(hk, nu);
            Arr(hn + k * Hp + u0, nu) = (1.0f - Arr(z, nu)) * Arr(nn, nu) + Arr(z, nu) * hprev;
            emit(k, st, hn + k * Hp + u0, u0, nu, false);
          } else {
            // Phase 1: r and z; r * h goes to the shared buffer for the n gate's matmul.
            float *r = g, *z = g + nu;
            Arr(r, nu) += Eigen::Map<const Eigen::ArrayXf>(xp, nu);
            Arr(z, nu) += Eigen::Map<const Eigen::ArrayXf>(xp + nu, nu);
            ClipInPlace(g, 2 * nu, clip);
            ApplyActivation(dir.f, g, 2 * nu);
            Arr(s.shared.data() + k * H + u0, nu) =
                Arr(r, nu) * Eigen::Map<const Eigen::ArrayXf>(hk, nu);
          }
        } else {
          if (skip) {
            std::copy_n(hp + k * Hp + u0, nu, hn + k * Hp + u0);
            emit(k, st, hn + k * Hp + u0, u0, nu, true);
            continue;
          }
          Arr(g, nu) += Eigen::Map<const Eigen::ArrayXf>(xp, nu);
          ClipInPlace(g, nu, clip);
          ApplyActivation(dir.f, g, nu);
          std::copy_n(g, nu, hn + k * Hp + u0);
          emit(k, st, hn + k * Hp + u0, u0, nu, false);
        }
      }
    } else if (kind == kGruN) {
      // Phase 2: n = g(x_n + (r * h) R_n^T), then h = (1 - z) n + z h.
      if (nu > 0) {
        // [n, nu] n-gate columns = (r * h) [n, H] . R_n slice^T.
        PanelGemm(s.shared.data(), H, n, H, sl.Rn.data(), nu, gates + 2 * nu, Gn);
      }
      for (int64_t k = 0; k < n && nu > 0; ++k) {
        float* g = gates + k * G * nu;
        const float* hk = hp + k * Hp + u0;
        float* hk_new = hn + k * Hp + u0;
        if (masked(k, st)) {
          std::copy_n(hk, nu, hk_new);
          emit(k, st, hk_new, u0, nu, true);
          continue;
        }
        const float* xp = xproj + (s.offset[s.order[k]] + time_of(k, st)) * Gn;
        float *z = g + nu, *nn = g + 2 * nu;
        Arr(nn, nu) += Eigen::Map<const Eigen::ArrayXf>(xp + 2 * nu, nu);
        ClipInPlace(nn, nu, clip);
        ApplyActivation(dir.g, nn, nu);
        Arr(hk_new, nu) = (1.0f - Arr(z, nu)) * Arr(nn, nu) +
                          Arr(z, nu) * Eigen::Map<const Eigen::ArrayXf>(hk, nu);
        emit(k, st, hk_new, u0, nu, false);
      }
    } else {
      // h = P . (o * h(c)), each thread its slice of the projected units.
      if (np > 0) {
        // [n, np] projected units = (o * h(c)) [n, H] . P_slice^T.
        PanelGemm(s.shared.data(), H, n, H, sl.P.data(), np, hn + p0, Hp);
        for (int64_t k = 0; k < n; ++k) {
          const bool skip = masked(k, st);
          if (skip) std::copy_n(hp + k * Hp + p0, np, hn + k * Hp + p0);
          emit(k, st, hn + k * Hp + p0, p0, np, skip);
        }
      }
    }
  };

#pragma omp parallel num_threads(threads) if (threads > 1)
  {
#ifdef _OPENMP
    runner.Work(omp_get_thread_num(), task);
#else
    runner.Work(0, task);
#endif
  }

  // Final states: sorted row k's last step wrote parity len % 2 (the initial state if 0).
  for (int64_t k = 0; k < B; ++k) {
    const int b = s.order[k];
    std::copy_n(s.h[s.len[k] & 1].data() + k * Hp, Hp, h_out + b * Hp);
    if (lstm && c_out) std::copy_n(s.c.data() + k * H, H, c_out + b * H);
  }

  // Positions no valid step wrote. Only a forward Keras layer has positions after its last
  // step; Keras repeats the last output there. Every other unwritten position precedes the
  // first processed step (or is ONNX padding) and is zero.
  if (seq_out) {
    const bool repeat =
        spec_.masking == MaskSemantics::kKeras && !spec_.zero_output_for_mask && !dir.reverse;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t len = lengths[b];
      if (len == T) continue;
      int64_t from = len, to = T;
      if (dir.outputs_in_processing_order) from = 0, to = T - len;
      for (int64_t p = from; p < to; ++p) {
        float* dst = seq_out + (b * T + p) * Hp;
        if (repeat && len > 0) {
          std::copy_n(h_out + b * Hp, Hp, dst);
        } else {
          std::fill_n(dst, Hp, 0.0f);
        }
      }
    }
  }
}

}  // namespace rnnserve::engine::cpu
