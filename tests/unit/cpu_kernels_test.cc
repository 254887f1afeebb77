// The CPU engine's kernel sets (engine/cpu/panel_gemm.h): which one runs, and that the panel
// GEMM of the one that runs equals plain dot products. ctest runs this binary once per set
// (RNNSERVE_CPU_KERNELS=avx512|avx2|plain, tests/unit/cpu.cmake) beside the default run.

#include "engine/cpu/panel_gemm.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace rnnserve::engine::cpu {
namespace {

// What the kernel set needs, read from the kernel's own list of CPU flags (/proc/cpuinfo): a
// reference apart from the CPUID calls the dispatcher makes.
bool Supports(CpuKernelSet set) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line) && line.rfind("flags", 0) != 0) {
  }
  std::istringstream words(line);
  std::set<std::string> flags{std::istream_iterator<std::string>(words), {}};
  std::vector<std::string> needs;
  if (set == CpuKernelSet::kAvx512) needs = {"avx512f", "avx512vl", "avx512bw", "avx512dq", "fma"};
  if (set == CpuKernelSet::kAvx2) needs = {"avx2", "fma"};
  for (const std::string& f : needs) {
    if (!flags.count(f)) return false;
  }
  return true;
}

TEST(CpuKernelsTest, BestSetIsTheWidestTheCpuHas) {
  const CpuKernelSet best = BestCpuKernelSet();
  EXPECT_TRUE(Supports(best));
  if (Supports(CpuKernelSet::kAvx512)) {
    EXPECT_EQ(best, CpuKernelSet::kAvx512);
  } else if (Supports(CpuKernelSet::kAvx2)) {
    EXPECT_EQ(best, CpuKernelSet::kAvx2);
  } else {
    EXPECT_EQ(best, CpuKernelSet::kPlain);
  }
}

TEST(CpuKernelsTest, ActiveSetIsTheForcedOneOrTheBest) {
  const char* forced = std::getenv("RNNSERVE_CPU_KERNELS");
  const auto active = ActiveCpuKernelSet();
  if (forced == nullptr || *forced == '\0') {
    ASSERT_TRUE(active.ok()) << active.status();
    EXPECT_EQ(*active, BestCpuKernelSet());
    return;
  }
  for (CpuKernelSet set : {CpuKernelSet::kAvx512, CpuKernelSet::kAvx2, CpuKernelSet::kPlain}) {
    if (std::string(forced) != CpuKernelSetName(set)) continue;
    if (!Supports(set)) {
      EXPECT_EQ(active.status().code(), absl::StatusCode::kFailedPrecondition);
      GTEST_SKIP() << "this CPU lacks the " << forced << " set";
    }
    ASSERT_TRUE(active.ok()) << active.status();
    EXPECT_EQ(*active, set);
    return;
  }
  EXPECT_EQ(active.status().code(), absl::StatusCode::kInvalidArgument);
}

// C = A . B^T against double-precision dot products, over shapes that cover every micro-tile
// height, partial panels and short k.
TEST(CpuKernelsTest, PanelGemmEqualsDotProductsOnEveryTileShape) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int m : {1, 2, 3, 4, 5, 11, 12, 13, 25, 64, 130}) {
    for (int n : {1, 31, 32, 33, 100}) {
      for (int k : {1, 3, 7, 64}) {
        std::vector<float> a(static_cast<size_t>(m) * k), b(static_cast<size_t>(n) * k);
        for (float& x : a) x = u(rng);
        for (float& x : b) x = u(rng);
        const AlignedFloats panels = PackPanels(b.data(), k, n, k);
        for (bool backwards : {false, true}) {
          std::vector<float> c(static_cast<size_t>(m) * n, -99.0f);
          PanelGemm(a.data(), k, m, k, panels.data(), n, c.data(), n, backwards);
          for (int i = 0; i < m; ++i) {
            for (int j = 0; j < n; ++j) {
              double want = 0;
              for (int l = 0; l < k; ++l) want += double(a[i * k + l]) * b[j * k + l];
              ASSERT_NEAR(c[i * n + j], want, 1e-5 * (k + 1))
                  << "m=" << m << " n=" << n << " k=" << k << " at (" << i << ", " << j << ")";
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace rnnserve::engine::cpu
