// The per-step work of each recurrent cell kind on one thread's unit slice (see
// recurrent_steps.h). Gate slices are gate-major: column q*nu + j is gate q of unit u0 + j.

#include "engine/cpu/recurrent_steps.h"

#include <algorithm>

#include "engine/cpu/activation.h"
#include "engine/cpu/quant_gemm.h"

namespace rnnserve::engine::cpu {
namespace {

using Arr = Eigen::Map<Eigen::ArrayXf>;
using CArr = Eigen::Map<const Eigen::ArrayXf>;

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
  for (int64_t k = 0; k < t.n && t.nu > 0; ++k) {
    if (r.masked(k, t.st)) {
      CarryMaskedRow(r, t, k);
      continue;
    }
    update(k, t.gates + k * r.G * t.nu);
  }
}

}  // namespace

void ProjectInputs(const SliceStep& t, const float* xin, int64_t rows, int64_t I, int G) {
  const int Gn = G * t.nu;
  if (t.nu == 0 || rows == 0) return;
  float* xproj = t.xproj;
  t.sl.W.Gemm(xin, I, rows, xproj, Gn, false, t.gemm);
  for (int64_t row = 0; row < rows; ++row) {
    Arr(xproj + row * Gn, Gn) += CArr(t.sl.bias.data(), Gn);
  }
}

void RecurrentMatmul(const DirectionRun& r, const SliceStep& t) {
  if (t.nu == 0) return;
  // GRU reset_after=false: R holds the r and z columns only.
  t.sl.R.Gemm(t.hp, r.Hp, t.n, t.gates, r.G * t.nu, t.st & 1, t.gemm);
}

void LstmStep(const DirectionRun& r, const SliceStep& t) {
  const int nu = t.nu, u0 = t.u0, H = r.H, Hp = r.Hp;
  const float* peep = r.peep;
  const bool projected = r.spec.proj_size > 0;
  for (int64_t k = 0; k < t.n && nu > 0; ++k) {
    if (r.masked(k, t.st)) {
      // With a projection, ProjectionStep carries the projected state.
      if (!projected) CarryMaskedRow(r, t, k);
      continue;
    }
    float* g = t.gates + k * r.G * nu;
    const float* xp = t.xp(r, k);
    float* c = r.s.c.data() + k * H + u0;
    float *zi = g, *zf = g + nu, *zc = g + 2 * nu, *zo = g + 3 * nu;
    for (int q = 0; q < 4; ++q) Arr(g + q * nu, nu) += CArr(xp + q * nu, nu);
    if (peep) {
      CArr C(c, nu);
      Arr(zi, nu) += CArr(peep + u0, nu) * C;
      Arr(zf, nu) += CArr(peep + H + u0, nu) * C;
    }
    ClipInPlace(g, peep ? 3 * nu : 4 * nu, r.clip);  // zo waits for its peephole
    ApplyActivation(r.dir.f, zi, nu);
    if (r.spec.input_forget) {
      Arr(zf, nu) = 1.0f - Arr(zi, nu);
    } else {
      ApplyActivation(r.dir.f, zf, nu);
    }
    ApplyActivation(r.dir.g, zc, nu);
    Arr(c, nu) = Arr(zf, nu) * Arr(c, nu) + Arr(zi, nu) * Arr(zc, nu);
    if (peep) {
      Arr(zo, nu) += CArr(peep + 2 * H + u0, nu) * Arr(c, nu);
      ClipInPlace(zo, nu, r.clip);
    }
    ApplyActivation(r.dir.f, zo, nu);
    std::copy_n(c, nu, zc);  // zc now holds h(c)
    ApplyActivation(r.dir.h, zc, nu);
    float* hout = projected ? r.s.shared.data() + k * H + u0 : t.hn + k * Hp + u0;
    Arr(hout, nu) = Arr(zo, nu) * Arr(zc, nu);
    if (!projected) r.emit(k, t.st, hout, u0, nu, false);
  }
}

void GruResetAfterStep(const DirectionRun& r, const SliceStep& t) {
  const int nu = t.nu, u0 = t.u0, Hp = r.Hp;
  ForEachLiveRow(r, t, [&](int64_t k, float* g) {
    const float* xp = t.xp(r, k);
    const float* hk = t.hp + k * Hp + u0;
    float *rg = g, *z = g + nu, *nn = g + 2 * nu;
    Arr(rg, nu) += CArr(xp, nu);
    Arr(z, nu) += CArr(xp + nu, nu);
    ClipInPlace(g, 2 * nu, r.clip);
    ApplyActivation(r.dir.f, g, 2 * nu);
    Arr(nn, nu) = CArr(xp + 2 * nu, nu) + Arr(rg, nu) * (Arr(nn, nu) + CArr(t.sl.bRn.data(), nu));
    ClipInPlace(nn, nu, r.clip);
    ApplyActivation(r.dir.g, nn, nu);
    CArr hprev(hk, nu);
    Arr(t.hn + k * Hp + u0, nu) = (1.0f - Arr(z, nu)) * Arr(nn, nu) + Arr(z, nu) * hprev;
    r.emit(k, t.st, t.hn + k * Hp + u0, u0, nu, false);
  });
}

void GruResetBeforeGatesStep(const DirectionRun& r, const SliceStep& t) {
  // r and z; r * h goes to the shared buffer for the n gate's matmul. Masked rows are carried
  // by GruNewStateStep (their r * h is computed and never read).
  const int nu = t.nu, u0 = t.u0;
  for (int64_t k = 0; k < t.n && nu > 0; ++k) {
    float* g = t.gates + k * r.G * nu;
    const float* xp = t.xp(r, k);
    const float* hk = t.hp + k * r.Hp + u0;
    float *rg = g, *z = g + nu;
    Arr(rg, nu) += CArr(xp, nu);
    Arr(z, nu) += CArr(xp + nu, nu);
    ClipInPlace(g, 2 * nu, r.clip);
    ApplyActivation(r.dir.f, g, 2 * nu);
    Arr(r.s.shared.data() + k * r.H + u0, nu) = Arr(rg, nu) * CArr(hk, nu);
  }
}

void GruNewStateStep(const DirectionRun& r, const SliceStep& t) {
  const int nu = t.nu, u0 = t.u0, Hp = r.Hp, Gn = r.G * nu;
  if (nu > 0) {
    // [n, nu] n-gate columns = (r * h) [n, H] . R_n slice^T.
    t.sl.Rn.Gemm(r.s.shared.data(), r.H, t.n, t.gates + 2 * nu, Gn, false, t.gemm);
  }
  ForEachLiveRow(r, t, [&](int64_t k, float* g) {
    const float* hk = t.hp + k * Hp + u0;
    float* hk_new = t.hn + k * Hp + u0;
    const float* xp = t.xp(r, k);
    float *z = g + nu, *nn = g + 2 * nu;
    Arr(nn, nu) += CArr(xp + 2 * nu, nu);
    ClipInPlace(nn, nu, r.clip);
    ApplyActivation(r.dir.g, nn, nu);
    Arr(hk_new, nu) = (1.0f - Arr(z, nu)) * Arr(nn, nu) + Arr(z, nu) * CArr(hk, nu);
    r.emit(k, t.st, hk_new, u0, nu, false);
  });
}

void SimpleRnnStep(const DirectionRun& r, const SliceStep& t) {
  const int nu = t.nu, u0 = t.u0, Hp = r.Hp;
  ForEachLiveRow(r, t, [&](int64_t k, float* g) {
    Arr(g, nu) += CArr(t.xp(r, k), nu);
    ClipInPlace(g, nu, r.clip);
    ApplyActivation(r.dir.f, g, nu);
    std::copy_n(g, nu, t.hn + k * Hp + u0);
    r.emit(k, t.st, t.hn + k * Hp + u0, u0, nu, false);
  });
}

void ProjectionStep(const DirectionRun& r, const SliceStep& t) {
  const int p0 = t.p0, np = t.np, Hp = r.Hp;
  if (np == 0) return;
  // [n, np] projected units = (o * h(c)) [n, H] . P_slice^T.
  t.sl.P.Gemm(r.s.shared.data(), r.H, t.n, t.hn + p0, Hp, false, t.gemm);
  for (int64_t k = 0; k < t.n; ++k) {
    const bool skip = r.masked(k, t.st);
    if (skip) std::copy_n(t.hp + k * Hp + p0, np, t.hn + k * Hp + p0);
    r.emit(k, t.st, t.hn + k * Hp + p0, p0, np, skip);
  }
}

}  // namespace rnnserve::engine::cpu
