#pragma once

// TF32 tensor-core products for FusedRnn's kernels (.cu files only): one mma.sync m16n8k8 with
// FP32 accumulation, and the split of FP32 operands that keeps FP32 accuracy with three of them
// (x = hi + lo; a . b ~ hi_a . hi_b + (hi_a . lo_b + lo_a . hi_b), the small terms summed in an
// accumulator of their own so that they are not rounded against the large sum). What the split
// leaves out, lo_a . lo_b and lo's bits past TF32, is ~2^-21 of each product; FP32 FMAs round at
// 2^-24.
//
// Fragments (g = lane / 4, c = lane % 4): A (16 x 8, rows x columns) a0 (g, c), a1 (g + 8, c),
// a2 (g, c + 4), a3 (g + 8, c + 4); B (8 x 8, columns x outputs) b0 (c, g), b1 (c + 4, g);
// D (16 x 8) d0 (g, 2c), d1 (g, 2c + 1), d2 (g + 8, 2c), d3 (g + 8, 2c + 1).

#include <cstdint>

namespace rnnserve::engine::cuda {

// d += a . b.
__device__ __forceinline__ void MmaTf32(float (&d)[4], const uint32_t (&a)[4],
                                        const uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Operands as the bits mma.sync reads (the top 19 of each: it truncates to TF32). kMma 1: x as
// it is (TF32 math). kMma 3: hi = x rounded to TF32 (to nearest, ties away from zero: the add
// carries into the exponent where it must) and lo = x - hi (exact; |lo| <= 2^-11 |x|, of which
// the tensor core keeps 11 bits). Integer and FP32 arithmetic only: cvt.rna.tf32.f32 issues at
// a fraction of their rate, and the kernels split every operand they read.
template <int kMma, int N>
__device__ __forceinline__ void SplitTf32(const float (&x)[N], uint32_t (&hi)[N],
                                          uint32_t (&lo)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
    if constexpr (kMma == 3) {
      hi[i] = (__float_as_uint(x[i]) + 0x1000u) & 0xffffe000u;
      lo[i] = __float_as_uint(x[i] - __uint_as_float(hi[i]));
    } else {
      hi[i] = __float_as_uint(x[i]);
    }
  }
}

// big += a . b and, for kMma 3, small += the cross terms (hi . lo + lo . hi).
template <int kMma>
__device__ __forceinline__ void MmaSplit(float (&big)[4], float (&small)[4],
                                         const uint32_t (&ah)[4], const uint32_t (&al)[4],
                                         const uint32_t (&bh)[2], const uint32_t (&bl)[2]) {
  MmaTf32(big, ah, bh);
  if constexpr (kMma == 3) {
    MmaTf32(small, ah, bl);
    MmaTf32(small, al, bh);
  }
}

}  // namespace rnnserve::engine::cuda
