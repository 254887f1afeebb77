#pragma once

// The micro-kernels behind PackedWeights (quant_gemm.h), one table per kernel set. Internal to
// engine/cpu. A kernel computes `rows` x 32 columns of C from one panel of packed weights.

#include <cstdint>

#include "engine/cpu/panel_gemm.h"

namespace rnnserve::engine::cpu {

// BF16: `a` is A as floats (lda floats a row) or, when the table's pairs_a is set, A rounded to
// bfloat16 pairs (lda uint32 a row, k rounded up to even, zero-padded). `panel` is
// [k/2][32][2] bfloat16 (k rounded up to even). k is A's true width.
using Bf16KernelFn = void (*)(const void* a, int64_t lda, const uint16_t* panel, int k, float* c,
                              int64_t ldc, int cols);

struct Bf16Table {
  bool pairs_a;  // vdpbf16ps: A in bfloat16 pairs
  int max_rows;
  Bf16KernelFn by_rows[13];  // [rows], 1 <= rows <= max_rows
};

// How an INT8 tile's int32 sums become C: c[r][j] = a_scale[r] * w_scale[j] *
// (sum[r][j] - a_zero[r] * w_colsum[j]). Pointers at the tile's first row and column.
struct Int8Dequant {
  const float* a_scale;
  const int32_t* a_zero;
  const float* w_scale;
  const int32_t* w_colsum;
};

// INT8: `a` is A quantised to uint8, lda bytes a row (k rounded up to a multiple of 4,
// padded with zeros); `panel` is [k4][32][4] int8.
using Int8KernelFn = void (*)(const uint8_t* a, int64_t lda, const int8_t* panel, int k4,
                              const Int8Dequant& dq, float* c, int64_t ldc, int cols);

struct Int8Table {
  int max_rows;
  Int8KernelFn by_rows[13];
};

// The kernels of `set`; `native` picks the avx512 set's vdpbf16ps / vpdpbusd kernels (callers
// pass whether the CPU has avx512_bf16 / avx512_vnni; other sets ignore it).
const Bf16Table& Bf16TableFor(CpuKernelSet set, bool native);
const Int8Table& Int8TableFor(CpuKernelSet set, bool native);

}  // namespace rnnserve::engine::cpu
