// The BF16 and INT8 micro-kernels (quant_kernels.h). Like panel_gemm.cc's, each is defined once
// per kernel set with that set's target attributes, so one binary built for a baseline ISA
// carries all of them; a tile is MR rows x 32 columns of C held in registers, with KS partial
// sums over k when MR is small (to keep enough multiply-add chains in flight).

#include "engine/cpu/quant_kernels.h"

#include <immintrin.h>

#include <cstring>

#include "engine/cpu/vector_types.h"

namespace rnnserve::engine::cpu {
namespace {

// Writes `cols` (<= 32) floats of a tile row.
inline void StoreRow(const float* row, float* out, int cols) {
  std::memcpy(out, row, sizeof(float) * cols);
}

// BF16 widened in registers: a 32-bit word of the panel holds the bfloat16 pair (k even in the
// low half, k odd in the high half) of one column; a bfloat16 is the top half of its float,
// so `w << 16` and `w & 0xffff0000` are the two weights as floats.
#define RNNSERVE_BF16_WIDEN_KERNEL(NAME, VF, VI, ATTRIBUTES)                                  \
  template <int MR, int KS>                                                                   \
  ATTRIBUTES void NAME(const void* av, int64_t lda, const uint16_t* panel, int k, float* c,   \
                       int64_t ldc, int cols) {                                               \
    const float* a = static_cast<const float*>(av);                                           \
    constexpr int kLanes = sizeof(VF) / sizeof(float);                                        \
    constexpr int kNv = kPanel / kLanes;                                                      \
    VF acc[KS][MR][kNv];                                                                      \
    _Pragma("GCC unroll 8") for (int s = 0; s < KS; ++s) {                                    \
      _Pragma("GCC unroll 16") for (int r = 0; r < MR; ++r) {                                 \
        _Pragma("GCC unroll 8") for (int v = 0; v < kNv; ++v) acc[s][r][v] = VF{};            \
      }                                                                                       \
    }                                                                                         \
    /* Pairs of k, then k's last element when k is odd (its pair's high half is zero). */     \
    const int pairs = (k + 1) / 2;                                                            \
    for (int p0 = 0; p0 < pairs; p0 += KS) {                                                  \
      _Pragma("GCC unroll 8") for (int s = 0; s < KS; ++s) {                                  \
        const int p = p0 + s;                                                                 \
        if (KS > 1 && p >= pairs) break;                                                      \
        const bool odd_tail = 2 * p + 1 == k;                                                 \
        VF lo[kNv], hi[kNv];                                                                  \
        _Pragma("GCC unroll 8") for (int v = 0; v < kNv; ++v) {                               \
          const VI w = *reinterpret_cast<const VI*>(panel + p * 2 * kPanel + v * 2 * kLanes); \
          lo[v] = reinterpret_cast<VF>(w << 16);                                              \
          hi[v] = reinterpret_cast<VF>(w & static_cast<int32_t>(0xffff0000u));                \
        }                                                                                     \
        _Pragma("GCC unroll 16") for (int r = 0; r < MR; ++r) {                               \
          const float x0 = a[r * lda + 2 * p];                                                \
          const float x1 = odd_tail ? 0.0f : a[r * lda + 2 * p + 1];                          \
          _Pragma("GCC unroll 8") for (int v = 0; v < kNv; ++v) acc[s][r][v] +=               \
              x0 * lo[v] + x1 * hi[v];                                                        \
        }                                                                                     \
      }                                                                                       \
    }                                                                                         \
    _Pragma("GCC unroll 16") for (int r = 0; r < MR; ++r) {                                   \
      _Pragma("GCC unroll 8") for (int s = 1; s < KS; ++s) {                                  \
        _Pragma("GCC unroll 8") for (int v = 0; v < kNv; ++v) acc[0][r][v] += acc[s][r][v];   \
      }                                                                                       \
      float tmp[kPanel];                                                                      \
      _Pragma("GCC unroll 8") for (int v = 0; v < kNv; ++v)                                   \
          std::memcpy(tmp + v * kLanes, &acc[0][r][v], sizeof(VF));                           \
      StoreRow(tmp, c + r * ldc, cols);                                                       \
    }                                                                                         \
  }

// INT8 with int32 vector multiply-adds: a 32-bit word of the panel holds one column's four
// int8 weights (k = 4q .. 4q+3, lowest byte first); arithmetic shifts sign-extend each.
#define RNNSERVE_INT8_PLAIN_KERNEL(NAME, VI, ATTRIBUTES)                                      \
  template <int MR, int KS>                                                                   \
  ATTRIBUTES void NAME(const uint8_t* a, int64_t lda, const int8_t* panel, int k4,            \
                       const Int8Dequant& dq, float* c, int64_t ldc, int cols) {              \
    constexpr int kLanes = sizeof(VI) / sizeof(int32_t);                                      \
    constexpr int kNv = kPanel / kLanes;                                                      \
    VI acc[KS][MR][kNv];                                                                      \
    _Pragma("GCC unroll 8") for (int s = 0; s < KS; ++s) {                                    \
      _Pragma("GCC unroll 16") for (int r = 0; r < MR; ++r) {                                 \
        _Pragma("GCC unroll 8") for (int v = 0; v < kNv; ++v) acc[s][r][v] = VI{};            \
      }                                                                                       \
    }                                                                                         \
    for (int q0 = 0; q0 < k4; q0 += KS) {                                                     \
      _Pragma("GCC unroll 8") for (int s = 0; s < KS; ++s) {                                  \
        const int q = q0 + s;                                                                 \
        if (KS > 1 && q >= k4) break;                                                         \
        VI w0[kNv], w1[kNv], w2[kNv], w3[kNv];                                                \
        _Pragma("GCC unroll 8") for (int v = 0; v < kNv; ++v) {                               \
          const VI w = *reinterpret_cast<const VI*>(panel + q * 4 * kPanel + v * 4 * kLanes); \
          w0[v] = (w << 24) >> 24;                                                            \
          w1[v] = (w << 16) >> 24;                                                            \
          w2[v] = (w << 8) >> 24;                                                             \
          w3[v] = w >> 24;                                                                    \
        }                                                                                     \
        _Pragma("GCC unroll 16") for (int r = 0; r < MR; ++r) {                               \
          const uint8_t* x = a + r * lda + 4 * q;                                             \
          const int32_t x0 = x[0], x1 = x[1], x2 = x[2], x3 = x[3];                           \
          _Pragma("GCC unroll 8") for (int v = 0; v < kNv; ++v) acc[s][r][v] +=               \
              x0 * w0[v] + x1 * w1[v] + x2 * w2[v] + x3 * w3[v];                              \
        }                                                                                     \
      }                                                                                       \
    }                                                                                         \
    _Pragma("GCC unroll 16") for (int r = 0; r < MR; ++r) {                                   \
      _Pragma("GCC unroll 8") for (int s = 1; s < KS; ++s) {                                  \
        _Pragma("GCC unroll 8") for (int v = 0; v < kNv; ++v) acc[0][r][v] += acc[s][r][v];   \
      }                                                                                       \
      int32_t sum[kPanel];                                                                    \
      _Pragma("GCC unroll 8") for (int v = 0; v < kNv; ++v)                                   \
          std::memcpy(sum + v * kLanes, &acc[0][r][v], sizeof(VI));                           \
      float tmp[kPanel];                                                                      \
      const float sa = dq.a_scale[r];                                                         \
      const int32_t za = dq.a_zero[r];                                                        \
      for (int j = 0; j < kPanel; ++j) {                                                      \
        tmp[j] = sa * dq.w_scale[j] * static_cast<float>(sum[j] - za * dq.w_colsum[j]);       \
      }                                                                                       \
      StoreRow(tmp, c + r * ldc, cols);                                                       \
    }                                                                                         \
  }

RNNSERVE_BF16_WIDEN_KERNEL(Bf16WidenAvx512, F16, I16,
                           __attribute__((target(RNNSERVE_TARGET_AVX512))))
RNNSERVE_BF16_WIDEN_KERNEL(Bf16WidenAvx2, F8, I8, __attribute__((target(RNNSERVE_TARGET_AVX2))))
RNNSERVE_BF16_WIDEN_KERNEL(Bf16WidenPlain, F4, I4, )
RNNSERVE_INT8_PLAIN_KERNEL(Int8Avx512, I16, __attribute__((target(RNNSERVE_TARGET_AVX512))))
RNNSERVE_INT8_PLAIN_KERNEL(Int8Avx2, I8, __attribute__((target(RNNSERVE_TARGET_AVX2))))
RNNSERVE_INT8_PLAIN_KERNEL(Int8Plain, I4, )
#undef RNNSERVE_BF16_WIDEN_KERNEL
#undef RNNSERVE_INT8_PLAIN_KERNEL

// AVX-512 BF16: vdpbf16ps adds a[2p] * w[2p] + a[2p+1] * w[2p+1] to each FP32 lane; A's pair
// is one 32-bit word, broadcast. Two zmm hold a panel's 32 columns of one pair.
template <int MR, int KS>
__attribute__((target(RNNSERVE_TARGET_AVX512 ",avx512bf16"))) void Bf16DotAvx512(
    const void* av, int64_t lda, const uint16_t* panel, int k, float* c, int64_t ldc, int cols) {
  const uint32_t* a = static_cast<const uint32_t*>(av);
  __m512 acc[KS][MR][2];
#pragma GCC unroll 8
  for (int s = 0; s < KS; ++s) {
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) acc[s][r][0] = acc[s][r][1] = _mm512_setzero_ps();
  }
  // One loop body (a helper taking acc by reference left the accumulators on the stack).
  const int pairs = (k + 1) / 2;
  for (int p0 = 0; p0 < pairs; p0 += KS) {
#pragma GCC unroll 8
    for (int s = 0; s < KS; ++s) {
      const int p = p0 + s;
      if (KS > 1 && p >= pairs) break;
      const __m512bh w0 = (__m512bh)_mm512_loadu_si512(panel + p * 2 * kPanel);
      const __m512bh w1 = (__m512bh)_mm512_loadu_si512(panel + p * 2 * kPanel + kPanel);
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const __m512bh x = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[r * lda + p]));
        acc[s][r][0] = _mm512_dpbf16_ps(acc[s][r][0], x, w0);
        acc[s][r][1] = _mm512_dpbf16_ps(acc[s][r][1], x, w1);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 8
    for (int s = 1; s < KS; ++s) {
      acc[0][r][0] = _mm512_add_ps(acc[0][r][0], acc[s][r][0]);
      acc[0][r][1] = _mm512_add_ps(acc[0][r][1], acc[s][r][1]);
    }
    float* out = c + r * ldc;
    if (cols == kPanel) {
      _mm512_storeu_ps(out, acc[0][r][0]);
      _mm512_storeu_ps(out + 16, acc[0][r][1]);
    } else {
      alignas(64) float tmp[kPanel];
      _mm512_store_ps(tmp, acc[0][r][0]);
      _mm512_store_ps(tmp + 16, acc[0][r][1]);
      StoreRow(tmp, out, cols);
    }
  }
}

// AVX-512 VNNI: vpdpbusd adds the four products uint8 a[4q+i] * int8 w[4q+i] to each int32
// lane (no saturation); A's quad is one 32-bit word, broadcast.
template <int MR, int KS>
__attribute__((target(RNNSERVE_TARGET_AVX512 ",avx512vnni"))) void Int8DotAvx512(
    const uint8_t* a, int64_t lda, const int8_t* panel, int k4, const Int8Dequant& dq, float* c,
    int64_t ldc, int cols) {
  // Accumulators as int32 vectors and the builtin behind _mm512_dpbusd_epi32: through the
  // intrinsic's __m512i (64-bit lanes) casts GCC 12 spilled 12-row tiles to the stack.
  I16 acc[KS][MR][2];
#pragma GCC unroll 8
  for (int s = 0; s < KS; ++s) {
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) acc[s][r][0] = acc[s][r][1] = I16{};
  }
  for (int q0 = 0; q0 < k4; q0 += KS) {
#pragma GCC unroll 8
    for (int s = 0; s < KS; ++s) {
      const int q = q0 + s;
      if (KS > 1 && q >= k4) break;
      const I16 w0 = *reinterpret_cast<const I16*>(panel + q * 4 * kPanel);
      const I16 w1 = *reinterpret_cast<const I16*>(panel + q * 4 * kPanel + 64);
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        int32_t quad;
        std::memcpy(&quad, a + r * lda + 4 * q, sizeof(quad));
        const I16 x = I16{} + quad;
        // <immintrin.h>'s intrinsic, which GCC and clang both know (the vector types are
        // the same 64 bytes).
        acc[s][r][0] = reinterpret_cast<I16>(
            _mm512_dpbusd_epi32(reinterpret_cast<__m512i>(acc[s][r][0]),
                                reinterpret_cast<__m512i>(x), reinterpret_cast<__m512i>(w0)));
        acc[s][r][1] = reinterpret_cast<I16>(
            _mm512_dpbusd_epi32(reinterpret_cast<__m512i>(acc[s][r][1]),
                                reinterpret_cast<__m512i>(x), reinterpret_cast<__m512i>(w1)));
      }
    }
  }
  const F16 ws0 = *reinterpret_cast<const F16*>(dq.w_scale);
  const F16 ws1 = *reinterpret_cast<const F16*>(dq.w_scale + 16);
  const I16 cs0 = *reinterpret_cast<const I16*>(dq.w_colsum);
  const I16 cs1 = *reinterpret_cast<const I16*>(dq.w_colsum + 16);
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 8
    for (int s = 1; s < KS; ++s) {
      acc[0][r][0] += acc[s][r][0];
      acc[0][r][1] += acc[s][r][1];
    }
    const int32_t za = dq.a_zero[r];
    const float sa = dq.a_scale[r];
    const F16 f0 = sa * ws0 * __builtin_convertvector(acc[0][r][0] - za * cs0, F16);
    const F16 f1 = sa * ws1 * __builtin_convertvector(acc[0][r][1] - za * cs1, F16);
    if (cols == kPanel) {
      *reinterpret_cast<F16*>(c + r * ldc) = f0;
      *reinterpret_cast<F16*>(c + r * ldc + 16) = f1;
    } else {
      float tmp[kPanel];
      std::memcpy(tmp, &f0, sizeof(f0));
      std::memcpy(tmp + 16, &f1, sizeof(f1));
      StoreRow(tmp, c + r * ldc, cols);
    }
  }
}

// Small row counts split k into partial sums so at least 8 multiply-add chains run at once.
constexpr Bf16Table kBf16DotAvx512 = {
    true,
    12,
    {nullptr, Bf16DotAvx512<1, 4>, Bf16DotAvx512<2, 2>, Bf16DotAvx512<3, 2>, Bf16DotAvx512<4, 1>,
     Bf16DotAvx512<5, 1>, Bf16DotAvx512<6, 1>, Bf16DotAvx512<7, 1>, Bf16DotAvx512<8, 1>,
     Bf16DotAvx512<9, 1>, Bf16DotAvx512<10, 1>, Bf16DotAvx512<11, 1>, Bf16DotAvx512<12, 1>}};
// The widened kernels hold two weight vectors per column block (low and high halves of the
// pairs): 10 rows keep every accumulator in a register.
constexpr Bf16Table kBf16WidenAvx512 = {
    false,
    10,
    {nullptr, Bf16WidenAvx512<1, 4>, Bf16WidenAvx512<2, 2>, Bf16WidenAvx512<3, 2>,
     Bf16WidenAvx512<4, 1>, Bf16WidenAvx512<5, 1>, Bf16WidenAvx512<6, 1>, Bf16WidenAvx512<7, 1>,
     Bf16WidenAvx512<8, 1>, Bf16WidenAvx512<9, 1>, Bf16WidenAvx512<10, 1>}};
constexpr Bf16Table kBf16WidenAvx2 = {
    false, 3, {nullptr, Bf16WidenAvx2<1, 2>, Bf16WidenAvx2<2, 1>, Bf16WidenAvx2<3, 1>}};
constexpr Bf16Table kBf16WidenPlain = {false, 1, {nullptr, Bf16WidenPlain<1, 1>}};

constexpr Int8Table kInt8DotAvx512 = {
    12,
    {nullptr, Int8DotAvx512<1, 4>, Int8DotAvx512<2, 2>, Int8DotAvx512<3, 2>, Int8DotAvx512<4, 1>,
     Int8DotAvx512<5, 1>, Int8DotAvx512<6, 1>, Int8DotAvx512<7, 1>, Int8DotAvx512<8, 1>,
     Int8DotAvx512<9, 1>, Int8DotAvx512<10, 1>, Int8DotAvx512<11, 1>, Int8DotAvx512<12, 1>}};
// The int32 kernels hold four sign-extended weight vectors per column block: fewer rows.
constexpr Int8Table kInt8Avx512 = {6,
                                   {nullptr, Int8Avx512<1, 2>, Int8Avx512<2, 1>, Int8Avx512<3, 1>,
                                    Int8Avx512<4, 1>, Int8Avx512<5, 1>, Int8Avx512<6, 1>}};
constexpr Int8Table kInt8Avx2 = {1, {nullptr, Int8Avx2<1, 1>}};
constexpr Int8Table kInt8Plain = {1, {nullptr, Int8Plain<1, 1>}};

}  // namespace

const Bf16Table& Bf16TableFor(CpuKernelSet set, bool native) {
  switch (set) {
    case CpuKernelSet::kAmx:  // the avx512 kernels beside the tiles
    case CpuKernelSet::kAvx512:
      return native ? kBf16DotAvx512 : kBf16WidenAvx512;
    case CpuKernelSet::kAvx2:
      return kBf16WidenAvx2;
    case CpuKernelSet::kPlain:
      break;
  }
  return kBf16WidenPlain;
}

const Int8Table& Int8TableFor(CpuKernelSet set, bool native) {
  switch (set) {
    case CpuKernelSet::kAmx:  // the avx512 kernels beside the tiles
    case CpuKernelSet::kAvx512:
      return native ? kInt8DotAvx512 : kInt8Avx512;
    case CpuKernelSet::kAvx2:
      return kInt8Avx2;
    case CpuKernelSet::kPlain:
      break;
  }
  return kInt8Plain;
}

}  // namespace rnnserve::engine::cpu
