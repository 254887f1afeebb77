#include "engine/cpu/panel_gemm.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "engine/cpu/amx_gemm.h"
#include "engine/cpu/vector_types.h"

namespace rnnserve::engine::cpu {
namespace {

constexpr int64_t kRowBlock = 120;  // most rows of A kept hot while the panels stream

using KernelFn = void (*)(const float*, int64_t, const float*, int, float*, int64_t, int);

// The micro-kernel: MR rows x 32 columns of C, a row being kPanel / lanes vectors of type V
// (vector_types.h: each kernel set uses its machine's own width, as a wider generic vector
// would be lowered through the stack);
// KS independent partial sums over k (to hide the FMA latency when MR is small), added at the
// end. Defined once per kernel set, each with its own target attribute, so that one binary
// built for a baseline ISA carries all of them.
#define RNNSERVE_PANEL_KERNEL(NAME, V, ATTRIBUTES)                                          \
  template <int MR, int KS>                                                                 \
  ATTRIBUTES void NAME(const float* a, int64_t lda, const float* panel, int k, float* c,    \
                       int64_t ldc, int cols) {                                             \
    constexpr int kLanes = sizeof(V) / sizeof(float);                                       \
    constexpr int kNv = kPanel / kLanes;                                                    \
    V acc[KS][MR][kNv];                                                                     \
    _Pragma("GCC unroll 64") for (int s = 0; s < KS; ++s) {                                 \
      _Pragma("GCC unroll 16") for (int r = 0; r < MR; ++r) {                               \
        _Pragma("GCC unroll 8") for (int v = 0; v < kNv; ++v) acc[s][r][v] = V{};           \
      }                                                                                     \
    }                                                                                       \
    int l = 0;                                                                              \
    for (; l + KS <= k; l += KS) {                                                          \
      _Pragma("GCC unroll 8") for (int s = 0; s < KS; ++s) {                                \
        V b[kNv];                                                                           \
        _Pragma("GCC unroll 8") for (int v = 0; v < kNv; ++v) b[v] =                        \
            *reinterpret_cast<const V*>(panel + (l + s) * kPanel + v * kLanes);             \
        _Pragma("GCC unroll 16") for (int r = 0; r < MR; ++r) {                             \
          const float x = a[r * lda + l + s];                                               \
          _Pragma("GCC unroll 8") for (int v = 0; v < kNv; ++v) acc[s][r][v] += x * b[v];   \
        }                                                                                   \
      }                                                                                     \
    }                                                                                       \
    for (; l < k; ++l) {                                                                    \
      V b[kNv];                                                                             \
      _Pragma("GCC unroll 8") for (int v = 0; v < kNv; ++v) b[v] =                          \
          *reinterpret_cast<const V*>(panel + l * kPanel + v * kLanes);                     \
      _Pragma("GCC unroll 16") for (int r = 0; r < MR; ++r) {                               \
        const float x = a[r * lda + l];                                                     \
        _Pragma("GCC unroll 8") for (int v = 0; v < kNv; ++v) acc[0][r][v] += x * b[v];     \
      }                                                                                     \
    }                                                                                       \
    _Pragma("GCC unroll 16") for (int r = 0; r < MR; ++r) {                                 \
      _Pragma("GCC unroll 8") for (int s = 1; s < KS; ++s) {                                \
        _Pragma("GCC unroll 8") for (int v = 0; v < kNv; ++v) acc[0][r][v] += acc[s][r][v]; \
      }                                                                                     \
      float* out = c + r * ldc;                                                             \
      if (cols == kPanel) {                                                                 \
        _Pragma("GCC unroll 8") for (int v = 0; v < kNv; ++v) *                             \
            reinterpret_cast<V*>(out + v * kLanes) = acc[0][r][v];                          \
      } else {                                                                              \
        float tmp[kPanel];                                                                  \
        _Pragma("GCC unroll 8") for (int v = 0; v < kNv; ++v) *                             \
            reinterpret_cast<V*>(tmp + v * kLanes) = acc[0][r][v];                          \
        std::memcpy(out, tmp, sizeof(float) * cols);                                        \
      }                                                                                     \
    }                                                                                       \
  }

// AVX-512: 32 zmm registers hold up to 12 rows x 2 vectors of accumulators.
RNNSERVE_PANEL_KERNEL(KernelAvx512, F16, __attribute__((target(RNNSERVE_TARGET_AVX512))))
// AVX2: a row is 4 ymm accumulators, and there are 16 ymm registers in all.
RNNSERVE_PANEL_KERNEL(KernelAvx2, F8, __attribute__((target(RNNSERVE_TARGET_AVX2))))
// The build's baseline (SSE2 on plain x86-64): a row is 8 xmm accumulators.
RNNSERVE_PANEL_KERNEL(KernelPlain, F4, )
#undef RNNSERVE_PANEL_KERNEL

constexpr CpuKernelSet kAllSets[] = {CpuKernelSet::kAmx, CpuKernelSet::kAvx512, CpuKernelSet::kAvx2,
                                     CpuKernelSet::kPlain};

struct KernelTable {
  int max_rows;
  KernelFn by_rows[13];  // [rows], 1 <= rows <= max_rows
};

// Small row counts split k into partial sums so at least 8 FMA chains run at once.
constexpr KernelTable kAvx512Table = {
    12,
    {nullptr, KernelAvx512<1, 4>, KernelAvx512<2, 2>, KernelAvx512<3, 2>, KernelAvx512<4, 1>,
     KernelAvx512<5, 1>, KernelAvx512<6, 1>, KernelAvx512<7, 1>, KernelAvx512<8, 1>,
     KernelAvx512<9, 1>, KernelAvx512<10, 1>, KernelAvx512<11, 1>, KernelAvx512<12, 1>}};
constexpr KernelTable kAvx2Table = {
    3, {nullptr, KernelAvx2<1, 2>, KernelAvx2<2, 1>, KernelAvx2<3, 1>}};
constexpr KernelTable kPlainTable = {1, {nullptr, KernelPlain<1, 1>}};

bool CpuHas(CpuKernelSet set) {
  __builtin_cpu_init();
  switch (set) {
    case CpuKernelSet::kAmx:
      return CpuHas(CpuKernelSet::kAvx512) && AmxAvailable();
    case CpuKernelSet::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("fma");
    case CpuKernelSet::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case CpuKernelSet::kPlain:
      return true;
  }
  return false;
}

// The set chosen once, before the first kernel runs: the one UseCpuKernelSet asked for, or the
// best the CPU has.
struct Choice {
  CpuKernelSet set = CpuKernelSet::kPlain;
  absl::Status status;
  std::string requested;  // "" for the best
};

absl::Mutex choice_mu;
// What UseCpuKernelSet asked for while the choice was still open.
std::string* requested_set ABSL_GUARDED_BY(choice_mu) = nullptr;
bool choice_made ABSL_GUARDED_BY(choice_mu) = false;

const Choice& Chosen() {
  static const Choice choice = [] {
    absl::MutexLock lock(&choice_mu);
    choice_made = true;
    Choice c;
    if (requested_set != nullptr) {
      const std::string& name = *requested_set;
      c.requested = name;
      bool known = false;
      for (CpuKernelSet set : kAllSets) {
        if (name != CpuKernelSetName(set)) continue;
        known = true;
        c.set = set;
        if (!CpuHas(set)) {
          // AMX can be missing from the CPU or withheld by the OS: the reason says which.
          const std::string why =
              set != CpuKernelSet::kAmx        ? "this CPU lacks the instructions of that set"
              : !CpuHas(CpuKernelSet::kAvx512) ? "amx needs AVX-512, which this CPU lacks"
                                               : "amx cannot run: " + AmxUnavailableReason();
          c.status = absl::FailedPreconditionError(
              absl::StrCat("RNNSERVE_CPU_KERNELS=", name, ": ", why, "; ",
                           CpuKernelSetName(BestCpuKernelSet()), " is the best it has"));
          c.set = CpuKernelSet::kPlain;
        }
      }
      if (!known) {
        c.status = absl::InvalidArgumentError(absl::StrCat(
            "RNNSERVE_CPU_KERNELS must be amx, avx512, avx2 or plain; was '", name, "'"));
      }
      return c;
    }
    c.set = BestCpuKernelSet();
    return c;
  }();
  return choice;
}

const KernelTable& Table() {
  static const KernelTable* table = [] {
    switch (Chosen().set) {
      case CpuKernelSet::kAmx:  // FP32 runs the avx512 kernels
      case CpuKernelSet::kAvx512:
        return &kAvx512Table;
      case CpuKernelSet::kAvx2:
        return &kAvx2Table;
      case CpuKernelSet::kPlain:
        break;
    }
    return &kPlainTable;
  }();
  return *table;
}

}  // namespace

const char* CpuKernelSetName(CpuKernelSet set) {
  switch (set) {
    case CpuKernelSet::kAmx:
      return "amx";
    case CpuKernelSet::kAvx512:
      return "avx512";
    case CpuKernelSet::kAvx2:
      return "avx2";
    case CpuKernelSet::kPlain:
      break;
  }
  return "plain";
}

CpuKernelSet BestCpuKernelSet() {
  for (CpuKernelSet set : kAllSets) {
    if (CpuHas(set)) return set;
  }
  return CpuKernelSet::kPlain;
}

absl::Status UseCpuKernelSet(const std::string& name) {
  if (name.empty()) return absl::OkStatus();
  {
    absl::MutexLock lock(&choice_mu);
    if (!choice_made && requested_set == nullptr) requested_set = new std::string(name);
  }
  if (const Choice& c = Chosen(); c.requested != name) {
    return absl::FailedPreconditionError(
        absl::StrCat("the CPU kernel set '", name, "' was asked for after ",
                     c.requested.empty() ? CpuKernelSetName(c.set) : c.requested,
                     " was chosen; one set runs per process"));
  }
  return absl::OkStatus();
}

absl::StatusOr<CpuKernelSet> ActiveCpuKernelSet() {
  if (!Chosen().status.ok()) return Chosen().status;
  return Chosen().set;
}

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
  const KernelTable& table = Table();
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
      const int64_t tiles = (i1 - i0 + table.max_rows - 1) / table.max_rows;
      for (int64_t t = 0; t < tiles; ++t) {
        const int64_t i = i0 + (i1 - i0) * t / tiles;
        const int rows = static_cast<int>(i0 + (i1 - i0) * (t + 1) / tiles - i);
        table.by_rows[rows](a + i * lda, lda, panel, k, c + i * ldc + p * kPanel, ldc, cols);
      }
    }
  }
}

}  // namespace rnnserve::engine::cpu
