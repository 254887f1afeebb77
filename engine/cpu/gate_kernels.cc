#include "engine/cpu/gate_kernels.h"

#include <cstdint>
#include <cstring>

#include "engine/cpu/vector_types.h"
#include "engine/ops/activation.h"

namespace rnnserve::engine::cpu {
namespace {

// Everything below is inlined into the per-set entry points at the end of the file, and so
// compiled with that set's target attributes (a function without a target inlines into one
// with a wider target).
#define RNNSERVE_INLINE inline __attribute__((always_inline))

template <typename V>
RNNSERVE_INLINE V Min(V a, V b) {
  return a < b ? a : b;
}
template <typename V>
RNNSERVE_INLINE V Max(V a, V b) {
  return a > b ? a : b;
}

// Cephes' exp (as Eigen's pexp_float): x = m ln2 + r, |r| <= ln2 / 2, a degree-6 polynomial for
// exp(r) and 2^m built in the exponent bits. Clamped so 2^m stays a normal float.
template <typename V, typename VI>
RNNSERVE_INLINE V Exp(V in) {
  V x = Min(Max(in, V{} - 87.3f), V{} + 88.0f);
  const float kRound = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds to integer
  const V m = (x * 1.44269504088896341f + kRound) - kRound;
  V r = m * -0.693359375f + x;
  r = m * 2.12194440e-4f + r;
  const V r2 = r * r, r3 = r2 * r;
  V y = r * 1.9875691500e-4f + 1.3981999507e-3f;
  V y1 = r * 4.1665795894e-2f + 1.6666665459e-1f;
  const V y2 = r + 1.0f;
  y = y * r + 8.3334519073e-3f;
  y1 = y1 * r + 5.0000001201e-1f;
  y = y * r3 + y1;
  y = y * r2 + y2;
  const VI bits = (__builtin_convertvector(m, VI) + 127) << 23;
  const V out = y * (V)bits;   // a same-size vector cast keeps the bits
  return in != in ? in : out;  // NaN stays NaN, as in std::exp and Eigen
}

template <typename V, typename VI>
RNNSERVE_INLINE V Sigmoid(V x) {
  return 1.0f / (1.0f + Exp<V, VI>(-x));
}

// Eigen's generic_fast_tanh_float: an odd degree-13 over even degree-6 rational function on
// x clamped to +-c (c where the approximation reaches 1), x itself for |x| < 4e-4.
template <typename V, bool kFma>
RNNSERVE_INLINE V Tanh(V a) {
  const float c = kFma ? 7.99881172180175781f : 7.90531110763549805f;
  const V x = Min(Max(a, V{} - c), V{} + c);
  const V x2 = x * x;
  V p = x2 * -2.76076847742355e-16f + 2.00018790482477e-13f;
  p = x2 * p + -8.60467152213735e-11f;
  p = x2 * p + 5.12229709037114e-08f;
  p = x2 * p + 1.48572235717979e-05f;
  p = x2 * p + 6.37261928875436e-04f;
  p = x2 * p + 4.89352455891786e-03f;
  p = x * p;
  V q = x2 * 1.19825839466702e-06f + 1.18534705686654e-04f;
  q = x2 * q + 2.26843463243900e-03f;
  q = x2 * q + 4.89352518554385e-03f;
  const V ax = a < 0.0f ? -a : a;
  // |x| < 4e-4: x itself (also where x is NaN, which the clamp above would have lost).
  return (ax < 0.0004f) | (a != a) ? a : p / q;
}

// Unaligned loads and stores through memcpy: a vector type passed as a template argument loses
// its aligned(4) attribute, and a dereference would assume full vector alignment.
template <typename V>
RNNSERVE_INLINE V Load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}
template <typename V>
RNNSERVE_INLINE void Store(float* p, V v) {
  std::memcpy(p, &v, sizeof(V));
}

// out[i] = op(in0[i], ...) over n values: whole vectors, then the tail through a zero-padded
// vector so that it gets the same operations as the body. out may alias any input.
template <typename V, typename Op, typename... In>
RNNSERVE_INLINE void Map(float* out, int n, Op op, const In*... in) {
  constexpr int kLanes = sizeof(V) / sizeof(float);
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    Store(out + i, op(Load<V>(in + i)...));
  }
  if (i == n) return;
  const int rest = n - i;
  auto tail = [&](const float* p) __attribute__((always_inline)) {
    V v{};
    std::memcpy(&v, p + i, sizeof(float) * rest);
    return v;
  };
  const V v = op(tail(in)...);
  std::memcpy(out + i, &v, sizeof(float) * rest);
}

template <typename V, typename VI, bool kFma>
RNNSERVE_INLINE void ActivateImpl(const Activation& a, float* x, int n) {
  switch (a.kind) {
    case ActivationKind::kLinear:
      return;
    case ActivationKind::kSigmoid:
      Map<V>(
          x, n, [](V v) __attribute__((always_inline)) { return Sigmoid<V, VI>(v); }, x);
      return;
    case ActivationKind::kTanh:
      Map<V>(
          x, n, [](V v) __attribute__((always_inline)) { return Tanh<V, kFma>(v); }, x);
      return;
    case ActivationKind::kRelu:
      Map<V>(
          x, n, [](V v) __attribute__((always_inline)) { return Max(v, V{}); }, x);
      return;
    case ActivationKind::kHardSigmoid: {
      const float alpha = a.alpha, beta = a.beta;
      Map<V>(
          x, n, [ alpha, beta ](V v) __attribute__((always_inline)) {
            return Min(Max(v * alpha + beta, V{}), V{} + 1.0f);
          },
          x);
      return;
    }
    default:
      for (int i = 0; i < n; ++i) x[i] = Activate(a, x[i]);
  }
}

template <typename V>
RNNSERVE_INLINE void ClipImpl(float* x, int n, float clip) {
  if (clip <= 0.0f) return;
  Map<V>(
      x,
      n, [clip](V v) __attribute__((always_inline)) { return Min(Max(v, V{} - clip), V{} + clip); },
      x);
}

// m (<= lanes) values at p, zero-padded past them; and the store of m lanes.
template <typename V>
RNNSERVE_INLINE V LoadN(const float* p, int m) {
  if (m == sizeof(V) / sizeof(float)) return Load<V>(p);
  V v{};
  std::memcpy(&v, p, sizeof(float) * m);
  return v;
}
template <typename V>
RNNSERVE_INLINE void StoreN(float* p, V v, int m) {
  if (m == sizeof(V) / sizeof(float)) return Store(p, v);
  std::memcpy(p, &v, sizeof(float) * m);
}

// body(i, m) over [0, n) in chunks of m = one vector's lanes (the last one shorter).
template <typename V, typename Body>
RNNSERVE_INLINE void ForChunks(int n, Body&& body) {
  constexpr int kLanes = sizeof(V) / sizeof(float);
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) body(i, kLanes);
  if (i < n) body(i, n - i);
}

// The same operations as the separate passes (add, activate, lstm_cell, activate, mul), so the
// fused row equals them.
template <typename V, typename VI, bool kFma>
RNNSERVE_INLINE void LstmRowImpl(const float* g, const float* xp, float* c, float* h, int n) {
  ForChunks<V>(
      n, [=](int i, int m) __attribute__((always_inline)) {
        const V zi = LoadN<V>(g + i, m) + LoadN<V>(xp + i, m);
        const V zf = LoadN<V>(g + n + i, m) + LoadN<V>(xp + n + i, m);
        const V zg = LoadN<V>(g + 2 * n + i, m) + LoadN<V>(xp + 2 * n + i, m);
        const V zo = LoadN<V>(g + 3 * n + i, m) + LoadN<V>(xp + 3 * n + i, m);
        const V iv = Sigmoid<V, VI>(zi), fv = Sigmoid<V, VI>(zf), gv = Tanh<V, kFma>(zg);
        const V cv = fv * LoadN<V>(c + i, m) + iv * gv;
        StoreN(c + i, cv, m);
        StoreN(h + i, Sigmoid<V, VI>(zo) * Tanh<V, kFma>(cv), m);
      });
}

// As GruResetAfterStep's passes (add, activate, gru_candidate, activate, gru_blend).
template <typename V, typename VI, bool kFma>
RNNSERVE_INLINE void GruRowImpl(const float* g, const float* xp, const float* b,
                                const float* h_prev, float* h, int n) {
  ForChunks<V>(
      n, [=](int i, int m) __attribute__((always_inline)) {
        const V r = Sigmoid<V, VI>(LoadN<V>(g + i, m) + LoadN<V>(xp + i, m));
        const V z = Sigmoid<V, VI>(LoadN<V>(g + n + i, m) + LoadN<V>(xp + n + i, m));
        const V cand = Tanh<V, kFma>(LoadN<V>(xp + 2 * n + i, m) +
                                     r * (LoadN<V>(g + 2 * n + i, m) + LoadN<V>(b + i, m)));
        StoreN(h + i, (1.0f - z) * cand + z * LoadN<V>(h_prev + i, m), m);
      });
}

// Softmax over rows: the max and the sum reduced in vectors (lanes past `cols` padded with
// -inf for the max and 0 for the sum), exp with the Cephes polynomial, one reciprocal per row.
template <typename V, typename VI>
RNNSERVE_INLINE void SoftmaxRowsImpl(float* x, int64_t rows, int64_t cols) {
  constexpr int kLanes = sizeof(V) / sizeof(float);
  const int n = static_cast<int>(cols);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * cols;
    V vm = V{} - __builtin_inff();
    int i = 0;
    for (; i + kLanes <= n; i += kLanes) vm = Max(vm, Load<V>(row + i));
    float m = -__builtin_inff();
    for (int l = 0; l < kLanes; ++l) m = vm[l] > m ? vm[l] : m;
    for (; i < n; ++i) m = row[i] > m ? row[i] : m;
    V vs{};
    Map<V>(
        row, n, [m](V v) __attribute__((always_inline)) { return Exp<V, VI>(v - m); }, row);
    i = 0;
    for (; i + kLanes <= n; i += kLanes) vs += Load<V>(row + i);
    float sum = 0.0f;
    for (int l = 0; l < kLanes; ++l) sum += vs[l];
    for (; i < n; ++i) sum += row[i];
    const float inv = 1.0f / sum;
    Map<V>(
        row, n, [inv](V v) __attribute__((always_inline)) { return v * inv; }, row);
  }
}

// One set's entry points: each inlines the templates above under the set's target attributes.
#define RNNSERVE_GATE_KERNELS(NS, V, VI, FMA, ATTRIBUTES)                                          \
  namespace NS {                                                                                   \
  ATTRIBUTES void Activate(const Activation& a, float* x, int n) {                                 \
    ActivateImpl<V, VI, FMA>(a, x, n);                                                             \
  }                                                                                                \
  ATTRIBUTES void Clip(float* x, int n, float clip) { ClipImpl<V>(x, n, clip); }                   \
  ATTRIBUTES void Add(float* x, const float* y, int n) {                                           \
    Map<V>(                                                                                        \
        x, n, [](V a, V b) __attribute__((always_inline)) { return a + b; }, x, y);                \
  }                                                                                                \
  ATTRIBUTES void AddMul(float* x, const float* a, const float* b, int n) {                        \
    Map<V>(                                                                                        \
        x, n, [](V s, V p, V q) __attribute__((always_inline)) { return s + p * q; }, x, a, b);    \
  }                                                                                                \
  ATTRIBUTES void Mul(float* out, const float* a, const float* b, int n) {                         \
    Map<V>(                                                                                        \
        out, n, [](V p, V q) __attribute__((always_inline)) { return p * q; }, a, b);              \
  }                                                                                                \
  ATTRIBUTES void OneMinus(float* out, const float* a, int n) {                                    \
    Map<V>(                                                                                        \
        out, n, [](V p) __attribute__((always_inline)) { return 1.0f - p; }, a);                   \
  }                                                                                                \
  ATTRIBUTES void LstmCell(float* c, const float* i, const float* f, const float* g, int n) {      \
    Map<V>(                                                                                        \
        c, n,                                                                                      \
        [](V cv, V iv, V fv, V gv) __attribute__((always_inline)) { return fv * cv + iv * gv; },   \
        c, i, f, g);                                                                               \
  }                                                                                                \
  ATTRIBUTES void GruBlend(float* out, const float* z, const float* cand, const float* h, int n) { \
    Map<V>(                                                                                        \
        out, n, [](V zv, V cv, V hv) __attribute__((always_inline)) {                              \
          return (1.0f - zv) * cv + zv * hv;                                                       \
        },                                                                                         \
        z, cand, h);                                                                               \
  }                                                                                                \
  ATTRIBUTES void GruCandidate(float* cand, const float* x, const float* r, const float* b,        \
                               int n) {                                                            \
    Map<V>(                                                                                        \
        cand, n,                                                                                   \
        [](V cv, V xv, V rv, V bv) __attribute__((always_inline)) { return xv + rv * (cv + bv); }, \
        cand, x, r, b);                                                                            \
  }                                                                                                \
  ATTRIBUTES void LstmRow(const float* g, const float* xp, float* c, float* h, int n) {            \
    LstmRowImpl<V, VI, FMA>(g, xp, c, h, n);                                                       \
  }                                                                                                \
  ATTRIBUTES void GruRow(const float* g, const float* xp, const float* b, const float* hp,         \
                         float* h, int n) {                                                        \
    GruRowImpl<V, VI, FMA>(g, xp, b, hp, h, n);                                                    \
  }                                                                                                \
  ATTRIBUTES void SoftmaxRows(float* x, int64_t rows, int64_t cols) {                              \
    SoftmaxRowsImpl<V, VI>(x, rows, cols);                                                         \
  }                                                                                                \
  constexpr GateKernels kKernels = {                                                               \
      Activate, Clip,     Add,          AddMul,  Mul,    OneMinus,                                 \
      LstmCell, GruBlend, GruCandidate, LstmRow, GruRow, SoftmaxRows};                             \
  }

RNNSERVE_GATE_KERNELS(avx512, F16, I16, true, __attribute__((target(RNNSERVE_TARGET_AVX512))))
RNNSERVE_GATE_KERNELS(avx2, F8, I8, true, __attribute__((target(RNNSERVE_TARGET_AVX2))))
#ifdef __FMA__
RNNSERVE_GATE_KERNELS(plain, F4, I4, true, )
#else
RNNSERVE_GATE_KERNELS(plain, F4, I4, false, )
#endif
#undef RNNSERVE_GATE_KERNELS

}  // namespace

const GateKernels& GateKernelsFor(CpuKernelSet set) {
  switch (set) {
    case CpuKernelSet::kAmx:  // the avx512 kernels beside the tiles
    case CpuKernelSet::kAvx512:
      return avx512::kKernels;
    case CpuKernelSet::kAvx2:
      return avx2::kKernels;
    case CpuKernelSet::kPlain:
      break;
  }
  return plain::kKernels;
}

const GateKernels& ActiveGateKernels() {
  static const GateKernels& kernels = []() -> const GateKernels& {
    const auto set = ActiveCpuKernelSet();
    return GateKernelsFor(set.ok() ? *set : CpuKernelSet::kPlain);
  }();
  return kernels;
}

}  // namespace rnnserve::engine::cpu
