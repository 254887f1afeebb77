// The per-step work of each recurrent cell kind on one thread's unit slice (see
// recurrent_steps.h). Gate slices are gate-major: column q*nu + j is gate q of unit u0 + j. The
// element-wise work runs on the kernel set the CPU was found to have (gate_kernels.h).

#include "engine/cpu/recurrent_steps.h"

#include <algorithm>

#include "engine/cpu/gate_kernels.h"
#include "engine/cpu/quant_gemm.h"

namespace rnnserve::engine::cpu {
namespace {

// A masked step inside the length: the slice keeps its state and emits it as a masked output.
void CarryMaskedRow(const DirectionRun& r, const SliceStep& t, int64_t k) {
  float* h_new = t.hn + k * r.Hp + t.u0;
  std::copy_n(t.hp + k * r.Hp + t.u0, t.nu, h_new);
  r.emit(k, t.st, h_new, t.u0, t.nu, true);
}

// Calls update(k, g) for each running row k not masked at this step, g its gates [G*nu]; a
// masked row carries its state.
template <typename Update>
void ForEachLiveRow(const DirectionRun& r, const SliceStep& t, Update&& update) {
  for (int64_t k = t.k0; k < t.n && t.nu > 0; ++k) {
    if (r.masked(k, t.st)) {
      CarryMaskedRow(r, t, k);
      continue;
    }
    update(k, t.g(r, k));
  }
}

bool Is(const Activation& a, ActivationKind kind) { return a.kind == kind; }

}  // namespace

void ProjectInputs(const SliceStep& t, const float* xin, int64_t rows, int64_t I, int G) {
  const int Gn = G * t.nu;
  if (t.nu == 0 || rows == 0) return;
  float* xproj = t.xproj;
  t.sl.W.Gemm(xin, I, rows, xproj, Gn, false, t.gemm);
  const GateKernels& gk = ActiveGateKernels();
  for (int64_t row = 0; row < rows; ++row) gk.add(xproj + row * Gn, t.sl.bias.data(), Gn);
}

void RecurrentMatmul(const DirectionRun& r, const SliceStep& t) {
  if (t.nu == 0) return;
  // GRU reset_after=false: R holds the r and z columns only.
  t.sl.R.Gemm(t.hp + t.k0 * r.Hp, r.Hp, t.n - t.k0, t.gates, r.G * t.nu, t.st & 1, t.gemm);
}

void LstmStep(const DirectionRun& r, const SliceStep& t) {
  const GateKernels& gk = ActiveGateKernels();
  const int nu = t.nu, u0 = t.u0, H = r.H, Hp = r.Hp;
  const float* peep = r.peep;
  const bool projected = r.spec.proj_size > 0;
  // Keras's and PyTorch's default cell in one pass per row (gate_kernels.h).
  const bool fused = !peep && r.clip <= 0.0f && !r.spec.input_forget &&
                     Is(r.dir.f, ActivationKind::kSigmoid) && Is(r.dir.g, ActivationKind::kTanh) &&
                     Is(r.dir.h, ActivationKind::kTanh);
  for (int64_t k = t.k0; k < t.n && nu > 0; ++k) {
    if (r.masked(k, t.st)) {
      // With a projection, ProjectionStep carries the projected state.
      if (!projected) CarryMaskedRow(r, t, k);
      continue;
    }
    float* g = t.g(r, k);
    const float* xp = t.xp(r, k);
    float* c = r.s.c.data() + k * H + u0;
    if (fused) {
      float* hout = projected ? r.s.shared.data() + k * H + u0 : t.hn + k * Hp + u0;
      gk.lstm_row(g, xp, c, hout, nu);
      if (!projected) r.emit(k, t.st, hout, u0, nu, false);
      continue;
    }
    float *zi = g, *zf = g + nu, *zc = g + 2 * nu, *zo = g + 3 * nu;
    gk.add(g, xp, 4 * nu);
    if (peep) {
      gk.add_mul(zi, peep + u0, c, nu);
      gk.add_mul(zf, peep + H + u0, c, nu);
    }
    gk.clip(g, peep ? 3 * nu : 4 * nu, r.clip);  // zo waits for its peephole
    gk.activate(r.dir.f, zi, nu);
    if (r.spec.input_forget) {
      gk.one_minus(zf, zi, nu);
    } else {
      gk.activate(r.dir.f, zf, nu);
    }
    gk.activate(r.dir.g, zc, nu);
    gk.lstm_cell(c, zi, zf, zc, nu);
    if (peep) {
      gk.add_mul(zo, peep + 2 * H + u0, c, nu);
      gk.clip(zo, nu, r.clip);
    }
    gk.activate(r.dir.f, zo, nu);
    std::copy_n(c, nu, zc);  // zc now holds h(c)
    gk.activate(r.dir.h, zc, nu);
    float* hout = projected ? r.s.shared.data() + k * H + u0 : t.hn + k * Hp + u0;
    gk.mul(hout, zo, zc, nu);
    if (!projected) r.emit(k, t.st, hout, u0, nu, false);
  }
}

void GruResetAfterStep(const DirectionRun& r, const SliceStep& t) {
  const GateKernels& gk = ActiveGateKernels();
  const int nu = t.nu, u0 = t.u0, Hp = r.Hp;
  const bool fused =
      r.clip <= 0.0f && Is(r.dir.f, ActivationKind::kSigmoid) && Is(r.dir.g, ActivationKind::kTanh);
  ForEachLiveRow(r, t, [&](int64_t k, float* g) {
    const float* xp = t.xp(r, k);
    const float* hk = t.hp + k * Hp + u0;
    if (fused) {
      gk.gru_row(g, xp, t.sl.bRn.data(), hk, t.hn + k * Hp + u0, nu);
      return r.emit(k, t.st, t.hn + k * Hp + u0, u0, nu, false);
    }
    float *rg = g, *z = g + nu, *nn = g + 2 * nu;
    gk.add(rg, xp, 2 * nu);  // r and z
    gk.clip(g, 2 * nu, r.clip);
    gk.activate(r.dir.f, g, 2 * nu);
    gk.gru_candidate(nn, xp + 2 * nu, rg, t.sl.bRn.data(), nu);
    gk.clip(nn, nu, r.clip);
    gk.activate(r.dir.g, nn, nu);
    gk.gru_blend(t.hn + k * Hp + u0, z, nn, hk, nu);
    r.emit(k, t.st, t.hn + k * Hp + u0, u0, nu, false);
  });
}

void GruResetBeforeGatesStep(const DirectionRun& r, const SliceStep& t) {
  const GateKernels& gk = ActiveGateKernels();
  // r and z; r * h goes to the shared buffer for the n gate's matmul. Masked rows are carried
  // by GruNewStateStep (their r * h is computed and never read).
  const int nu = t.nu, u0 = t.u0;
  for (int64_t k = t.k0; k < t.n && nu > 0; ++k) {
    float* g = t.g(r, k);
    const float* xp = t.xp(r, k);
    const float* hk = t.hp + k * r.Hp + u0;
    float* rg = g;           // then z
    gk.add(rg, xp, 2 * nu);  // r and z
    gk.clip(g, 2 * nu, r.clip);
    gk.activate(r.dir.f, g, 2 * nu);
    gk.mul(r.s.shared.data() + k * r.H + u0, rg, hk, nu);
  }
}

void GruNewStateStep(const DirectionRun& r, const SliceStep& t) {
  const GateKernels& gk = ActiveGateKernels();
  const int nu = t.nu, u0 = t.u0, Hp = r.Hp, Gn = r.G * nu;
  if (nu > 0) {
    // [n, nu] n-gate columns = (r * h) [n, H] . R_n slice^T.
    t.sl.Rn.Gemm(r.s.shared.data() + t.k0 * r.H, r.H, t.n - t.k0, t.gates + 2 * nu, Gn, false,
                 t.gemm);
  }
  ForEachLiveRow(r, t, [&](int64_t k, float* g) {
    const float* hk = t.hp + k * Hp + u0;
    float* hk_new = t.hn + k * Hp + u0;
    const float* xp = t.xp(r, k);
    float *z = g + nu, *nn = g + 2 * nu;
    gk.add(nn, xp + 2 * nu, nu);
    gk.clip(nn, nu, r.clip);
    gk.activate(r.dir.g, nn, nu);
    gk.gru_blend(hk_new, z, nn, hk, nu);
    r.emit(k, t.st, hk_new, u0, nu, false);
  });
}

void SimpleRnnStep(const DirectionRun& r, const SliceStep& t) {
  const GateKernels& gk = ActiveGateKernels();
  const int nu = t.nu, u0 = t.u0, Hp = r.Hp;
  ForEachLiveRow(r, t, [&](int64_t k, float* g) {
    gk.add(g, t.xp(r, k), nu);
    gk.clip(g, nu, r.clip);
    gk.activate(r.dir.f, g, nu);
    std::copy_n(g, nu, t.hn + k * Hp + u0);
    r.emit(k, t.st, t.hn + k * Hp + u0, u0, nu, false);
  });
}

void ProjectionStep(const DirectionRun& r, const SliceStep& t) {
  const int p0 = t.p0, np = t.np, Hp = r.Hp;
  if (np == 0) return;
  // [n, np] projected units = (o * h(c)) [n, H] . P_slice^T.
  t.sl.P.Gemm(r.s.shared.data() + t.k0 * r.H, r.H, t.n - t.k0, t.hn + t.k0 * Hp + p0, Hp, false,
              t.gemm);
  for (int64_t k = t.k0; k < t.n; ++k) {
    const bool skip = r.masked(k, t.st);
    if (skip) std::copy_n(t.hp + k * Hp + p0, np, t.hn + k * Hp + p0);
    r.emit(k, t.st, t.hn + k * Hp + p0, p0, np, skip);
  }
}

}  // namespace rnnserve::engine::cpu
