#pragma once

// C[m, n] = A[m, k] . B[n, k]^T with B prepacked once into column panels: the GEMM behind the
// recurrent kernel's input projection and per-step recurrent matmul.
//
// Panels are kPanel (32) columns of B wide, laid out [panel][k][32] and zero-padded past n, so
// the micro-kernel streams each panel sequentially. The micro-kernel holds up to 12 rows x 32
// columns of C in vector registers (GCC vector extensions: AVX-512 with -march=native, AVX2 or
// SSE otherwise); rows of A are blocked so a block stays in L2 while the panels stream past.
// Single-threaded: callers split the columns (units) between threads. Results equal a plain
// dot product up to FMA rounding.

#include <cstdint>
#include <vector>

namespace rnnserve::engine::cpu {

inline constexpr int kPanel = 32;

// B is [n, k] row-major with row stride ldb. Returns ceil(n / 32) * 32 * k floats.
std::vector<float> PackPanels(const float* b, int64_t ldb, int n, int k);

// C[i, j] = sum_l A[i, l] * B[j, l] for i < m, j < n; A has row stride lda, C row stride ldc.
void PanelGemm(const float* a, int64_t lda, int64_t m, int k, const float* panels, int n, float* c,
               int64_t ldc);

}  // namespace rnnserve::engine::cpu
