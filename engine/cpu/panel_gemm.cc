#include "engine/cpu/panel_gemm.h"

#include <algorithm>
#include <cstring>

namespace rnnserve::engine::cpu {
namespace {

// 16 floats; unaligned loads and stores (aligned(4)).
typedef float V16 __attribute__((vector_size(64), aligned(4)));

constexpr int kMaxRows = 12;        // rows of C per micro-kernel call
constexpr int64_t kRowBlock = 120;  // most rows of A kept hot while the panels stream

inline V16 Load(const float* p) { return *reinterpret_cast<const V16*>(p); }
inline void Store(float* p, V16 v) { *reinterpret_cast<V16*>(p) = v; }

// MR rows x 32 columns; KS independent partial sums over k (to hide the FMA latency when MR
// is small), added at the end.
template <int MR, int KS>
void Kernel(const float* a, int64_t lda, const float* panel, int k, float* c, int64_t ldc,
            int cols) {
  V16 acc[KS][MR][2];
#pragma GCC unroll 64
  for (int s = 0; s < KS; ++s) {
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) acc[s][r][0] = acc[s][r][1] = V16{};
  }
  int l = 0;
  for (; l + KS <= k; l += KS) {
#pragma GCC unroll 8
    for (int s = 0; s < KS; ++s) {
      const V16 b0 = Load(panel + (l + s) * kPanel);
      const V16 b1 = Load(panel + (l + s) * kPanel + 16);
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const float x = a[r * lda + l + s];
        acc[s][r][0] += x * b0;
        acc[s][r][1] += x * b1;
      }
    }
  }
  for (; l < k; ++l) {
    const V16 b0 = Load(panel + l * kPanel);
    const V16 b1 = Load(panel + l * kPanel + 16);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const float x = a[r * lda + l];
      acc[0][r][0] += x * b0;
      acc[0][r][1] += x * b1;
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    V16 lo = acc[0][r][0], hi = acc[0][r][1];
#pragma GCC unroll 8
    for (int s = 1; s < KS; ++s) {
      lo += acc[s][r][0];
      hi += acc[s][r][1];
    }
    float* out = c + r * ldc;
    if (cols == kPanel) {
      Store(out, lo);
      Store(out + 16, hi);
    } else {
      float tmp[kPanel];
      Store(tmp, lo);
      Store(tmp + 16, hi);
      std::memcpy(out, tmp, sizeof(float) * cols);
    }
  }
}

using KernelFn = void (*)(const float*, int64_t, const float*, int, float*, int64_t, int);

// Small row counts split k into partial sums so at least 8 FMA chains run at once.
constexpr KernelFn kKernels[kMaxRows + 1] = {
    nullptr,       Kernel<1, 4>,  Kernel<2, 2>, Kernel<3, 2>, Kernel<4, 1>,
    Kernel<5, 1>,  Kernel<6, 1>,  Kernel<7, 1>, Kernel<8, 1>, Kernel<9, 1>,
    Kernel<10, 1>, Kernel<11, 1>, Kernel<12, 1>};

}  // namespace

AlignedFloats PackPanels(const float* b, int64_t ldb, int n, int k) {
  const int panels = (n + kPanel - 1) / kPanel;
  AlignedFloats out(static_cast<size_t>(panels) * kPanel * k, 0.0f);
  for (int j = 0; j < n; ++j) {
    float* dst = out.data() + static_cast<size_t>(j / kPanel) * kPanel * k + j % kPanel;
    for (int l = 0; l < k; ++l) dst[static_cast<size_t>(l) * kPanel] = b[j * ldb + l];
  }
  return out;
}

void PanelGemm(const float* a, int64_t lda, int64_t m, int k, const float* panels, int n, float* c,
               int64_t ldc, bool backwards) {
  const int num_panels = (n + kPanel - 1) / kPanel;
  // Equal row blocks: 100 rows are one block of 100, not 96 and a block of 4 that streams
  // every panel again for little work.
  const int64_t blocks = (m + kRowBlock - 1) / kRowBlock;
  const int64_t block_rows = blocks > 0 ? (m + blocks - 1) / blocks : 0;
  for (int64_t i0 = 0; i0 < m; i0 += block_rows) {
    const int64_t i1 = std::min(m, i0 + block_rows);
    for (int q = 0; q < num_panels; ++q) {
      const int p = backwards ? num_panels - 1 - q : q;
      const float* panel = panels + static_cast<int64_t>(p) * kPanel * k;
      const int cols = std::min(kPanel, n - p * kPanel);
      // Micro-tiles of equal height: 64 rows are 6 tiles of 11 or 10, not 5 of 12 and one
      // of 4, whose few accumulators leave the FMA units waiting on loads.
      const int64_t tiles = (i1 - i0 + kMaxRows - 1) / kMaxRows;
      for (int64_t t = 0; t < tiles; ++t) {
        const int64_t i = i0 + (i1 - i0) * t / tiles;
        const int rows = static_cast<int>(i0 + (i1 - i0) * (t + 1) / tiles - i);
        kKernels[rows](a + i * lda, lda, panel, k, c + i * ldc + p * kPanel, ldc, cols);
      }
    }
  }
}

}  // namespace rnnserve::engine::cpu
