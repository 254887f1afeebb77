#pragma once

// The vector types and target attributes the CPU engine's per-kernel-set code is written in
// (panel_gemm.cc, quant_kernels.cc, gate_kernels.cc): GCC vector extensions of 16, 8 and 4 lanes
// (the register widths of AVX-512, AVX2 and SSE), and the target strings of the AVX-512 and AVX2
// kernel sets. aligned(4): loads and stores through these typedefs may be unaligned. (Passed as
// a template argument, a typedef loses that attribute: templates load through memcpy.)

#include <cstdint>

namespace rnnserve::engine::cpu {

typedef float F16 __attribute__((vector_size(64), aligned(4)));
typedef float F8 __attribute__((vector_size(32), aligned(4)));
typedef float F4 __attribute__((vector_size(16), aligned(4)));
typedef int32_t I16 __attribute__((vector_size(64), aligned(4)));
typedef int32_t I8 __attribute__((vector_size(32), aligned(4)));
typedef int32_t I4 __attribute__((vector_size(16), aligned(4)));

}  // namespace rnnserve::engine::cpu

// What the avx512 kernel set needs (CpuKernelSet::kAvx512), and the avx2 set.
#define RNNSERVE_TARGET_AVX512 "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma"
#define RNNSERVE_TARGET_AVX2 "avx2,fma"
