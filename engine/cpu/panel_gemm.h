#pragma once

// C[m, n] = A[m, k] . B[n, k]^T with B prepacked once into column panels: the GEMM behind the
// recurrent kernel's input projection and per-step recurrent matmul.
//
// Panels are kPanel (32) columns of B wide, laid out [panel][k][32] and zero-padded past n, so
// the micro-kernel streams each panel sequentially. The micro-kernel holds rows x 32 columns of
// C in vector registers (GCC vector extensions). It is built three times, for AVX-512 (12 rows),
// AVX2+FMA (2 rows) and the build's baseline (1 row), and the set is chosen once at run time:
// the best the CPU has (CPUID), or the one UseCpuKernelSet forces (EngineOptions::cpu_kernels;
// the server's RNNSERVE_CPU_KERNELS=amx|avx512|avx2|plain). The amx set is the avx512 set plus
// Intel AMX tiles for the BF16 and INT8 weight GEMMs (amx_gemm.h); its FP32 is avx512's. Rows of
// A are
// blocked so a block stays in L2 while the panels stream past.
// Single-threaded: callers split the columns (units) between threads. Results equal a plain
// dot product up to FMA rounding.

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace rnnserve::engine::cpu {

inline constexpr int kPanel = 32;

// Allocates on 64-byte boundaries. A panel row is one cache line only when the panels start on
// one: malloc's 16-byte alignment makes every 64-byte load span two lines, which costs about
// 1.7x in a GEMV that reads its panels from L2.
template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};
  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, size_t) { ::operator delete(p, kAlign); }
  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const {
    return true;
  }
};

using AlignedFloats = std::vector<float, CacheLineAllocator<float>>;

// kAmx: the avx512 set, with AMX tiles (amx_tile, amx_bf16, amx_int8) for BF16 and INT8 weights.
enum class CpuKernelSet { kAmx, kAvx512, kAvx2, kPlain };

const char* CpuKernelSetName(CpuKernelSet set);
// The best set this CPU runs.
CpuKernelSet BestCpuKernelSet();
// Forces the set by name ("amx", "avx512", "avx2", "plain"; "" changes nothing) for the whole
// process, before the first kernel runs (the engine factory calls it with
// EngineOptions::cpu_kernels; test and benchmark mains with RNNSERVE_CPU_KERNELS).
// FAILED_PRECONDITION when another set was chosen already; a name it cannot run is reported by
// ActiveCpuKernelSet. Thread-safe.
absl::Status UseCpuKernelSet(const std::string& name);
// The set PanelGemm runs: the one UseCpuKernelSet forced, else BestCpuKernelSet().
// INVALID_ARGUMENT for an unknown name, FAILED_PRECONDITION for a set this CPU lacks (PanelGemm
// then runs the plain set; the CPU engine refuses to compile models).
absl::StatusOr<CpuKernelSet> ActiveCpuKernelSet();

// B is [n, k] row-major with row stride ldb. Returns ceil(n / 32) * 32 * k floats.
AlignedFloats PackPanels(const float* b, int64_t ldb, int n, int k);

// C[i, j] = sum_l A[i, l] * B[j, l] for i < m, j < n; A has row stride lda, C row stride ldc.
// With `backwards` the panels stream last to first. A recurrent step alternates the direction:
// when B is a little larger than L2, the panels the previous step read last are still cached
// and are read first, where a cyclic sweep would miss on every panel (LRU).
void PanelGemm(const float* a, int64_t lda, int64_t m, int k, const float* panels, int n, float* c,
               int64_t ldc, bool backwards = false);

}  // namespace rnnserve::engine::cpu
