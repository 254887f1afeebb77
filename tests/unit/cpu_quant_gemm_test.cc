// The BF16 and INT8 weight GEMMs (engine/cpu/quant_gemm.h) of the kernel set that runs, against
// double-precision dot products of the numbers the documented scheme stores: weights rounded
// to bfloat16 (and, where vdpbf16ps runs, A too), or the int8 weights and uint8 inputs
// with their scales, quantised here independently of the engine's packing. ctest runs this
// binary once per forced kernel set (RNNSERVE_CPU_KERNELS, tests/unit/cpu.cmake); with amx the
// GEMMs of 4 rows and more run on AMX tiles (amx_gemm.h), fewer on the avx512 kernels.

#include "engine/cpu/quant_gemm.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/cpu/quant_kernels.h"
#include "gtest/gtest.h"

namespace rnnserve::engine::cpu {
namespace {

bool CpuFlag(const std::string& flag) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line) && line.rfind("flags", 0) != 0) {
  }
  return (line + " ").find(" " + flag + " ") != std::string::npos;
}

bool AmxRuns() {
  const auto set = ActiveCpuKernelSet();
  return set.ok() && *set == CpuKernelSet::kAmx;
}

// Whether the avx512 set (or amx, which holds it) runs with `flag` present: the native BF16 /
// VNNI kernels.
bool NativeKernels(const std::string& flag) {
  const auto set = ActiveCpuKernelSet();
  return set.ok() && (*set == CpuKernelSet::kAvx512 || *set == CpuKernelSet::kAmx) && CpuFlag(flag);
}

float RoundBf16(float x) { return static_cast<float>(Eigen::bfloat16(x)); }

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// C from the packed weights, both panel orders, with one scratch reused across shapes.
std::vector<float> GemmOf(const std::vector<float>& a, const std::vector<float>& b, int m, int n,
                          int k, CpuWeights mode, bool backwards, GemmScratch* scratch) {
  const PackedWeights w = PackedWeights::Pack(b.data(), k, n, k, mode);
  std::vector<float> c(static_cast<size_t>(m) * n, NAN);
  w.Gemm(a.data(), k, m, c.data(), n, backwards, scratch);
  return c;
}

// AMX (from 4 rows): one row tile (4 .. 16), pairs of tiles, whole 16-row tiles (64), a pair and
// a single tile (130: nine tiles of 15) and two row blocks of 150 (300).
constexpr int kRows[] = {1, 2, 3, 4, 5, 11, 12, 13, 16, 25, 64, 130, 300};
constexpr int kCols[] = {1, 31, 32, 33, 100};
constexpr int kDepth[] = {1, 2, 3, 5, 7, 64, 129};

TEST(CpuQuantGemmTest, WeightPathMatchesTheCpu) {
  EXPECT_EQ(CpuWeightsPath(CpuWeights::kFp32), "fp32");
  const std::string bf16 =
      NativeKernels("avx512_bf16") ? "avx512_bf16 vdpbf16ps" : "widened to fp32";
  const std::string int8 =
      NativeKernels("avx512_vnni") ? "avx512_vnni vpdpbusd" : "int32 multiply-add";
  if (AmxRuns()) {
    EXPECT_EQ(CpuWeightsPath(CpuWeights::kBf16),
              "bf16 (amx_bf16 tdpbf16ps; " + bf16 + " below 4 rows)");
    EXPECT_EQ(CpuWeightsPath(CpuWeights::kInt8),
              "int8 (amx_int8 tdpbusd; " + int8 + " below 4 rows)");
  } else {
    EXPECT_EQ(CpuWeightsPath(CpuWeights::kBf16), "bf16 (" + bf16 + ")");
    EXPECT_EQ(CpuWeightsPath(CpuWeights::kInt8), "int8 (" + int8 + ")");
  }
}

TEST(CpuQuantGemmTest, Bf16EqualsDotProductsOfRoundedOperandsOnEveryTileShape) {
  GemmScratch scratch;
  for (int m : kRows) {
    // AMX's tdpbf16ps takes A in bfloat16 too.
    const bool round_a = NativeKernels("avx512_bf16") || (AmxRuns() && m >= 4);
    for (int n : kCols) {
      for (int k : kDepth) {
        const std::vector<float> a = Random(size_t(m) * k, 1), b = Random(size_t(n) * k, 2);
        for (bool backwards : {false, true}) {
          const auto c = GemmOf(a, b, m, n, k, CpuWeights::kBf16, backwards, &scratch);
          for (int i = 0; i < m; ++i) {
            for (int j = 0; j < n; ++j) {
              double want = 0, mag = 0;
              for (int l = 0; l < k; ++l) {
                const double x = round_a ? RoundBf16(a[i * k + l]) : a[i * k + l];
                const double p = x * RoundBf16(b[j * k + l]);
                want += p;
                mag += std::abs(p);
              }
              ASSERT_NEAR(c[i * n + j], want, 1e-5 * mag + 1e-7)
                  << "m=" << m << " n=" << n << " k=" << k << " at " << i << "," << j;
            }
          }
        }
      }
    }
  }
}

// The scheme of quant_gemm.h, written out: per-row int8 weights with scale max|b| / 127, per-row
// uint8 inputs over [min(a, 0), max(a, 0)].
struct Quantised {
  std::vector<int> q;
  std::vector<double> scale, zero;
};

Quantised QuantiseWeights(const std::vector<float>& b, int n, int k) {
  Quantised out{std::vector<int>(b.size()), std::vector<double>(n), std::vector<double>(n, 0)};
  for (int j = 0; j < n; ++j) {
    float amax = 0;
    for (int l = 0; l < k; ++l) amax = std::max(amax, std::abs(b[j * k + l]));
    const float s = amax > 0 ? amax / 127.0f : 1.0f;
    out.scale[j] = s;
    for (int l = 0; l < k; ++l)
      out.q[j * k + l] = static_cast<int>(std::nearbyint(b[j * k + l] / s));
  }
  return out;
}

Quantised QuantiseInputs(const std::vector<float>& a, int m, int k) {
  Quantised out{std::vector<int>(a.size()), std::vector<double>(m), std::vector<double>(m)};
  for (int i = 0; i < m; ++i) {
    float lo = 0, hi = 0;
    for (int l = 0; l < k; ++l) {
      lo = std::min(lo, a[i * k + l]);
      hi = std::max(hi, a[i * k + l]);
    }
    const float s = hi > lo ? (hi - lo) / 255.0f : 1.0f;
    const float z = std::nearbyint(-lo * (1.0f / s));
    out.scale[i] = s;
    out.zero[i] = z;
    for (int l = 0; l < k; ++l) {
      const float v = std::nearbyint(a[i * k + l] * (1.0f / s)) + z;
      out.q[i * k + l] = static_cast<int>(std::clamp(v, 0.0f, 255.0f));
    }
  }
  return out;
}

TEST(CpuQuantGemmTest, Int8EqualsDequantisedIntegerDotProductsOnEveryTileShape) {
  GemmScratch scratch;
  for (int m : kRows) {
    for (int n : kCols) {
      for (int k : kDepth) {
        const std::vector<float> a = Random(size_t(m) * k, 3), b = Random(size_t(n) * k, 4);
        const Quantised qa = QuantiseInputs(a, m, k), qb = QuantiseWeights(b, n, k);
        for (bool backwards : {false, true}) {
          const auto c = GemmOf(a, b, m, n, k, CpuWeights::kInt8, backwards, &scratch);
          for (int i = 0; i < m; ++i) {
            for (int j = 0; j < n; ++j) {
              double dot = 0;
              for (int l = 0; l < k; ++l) dot += (qa.q[i * k + l] - qa.zero[i]) * qb.q[j * k + l];
              const double want = qa.scale[i] * qb.scale[j] * dot;
              ASSERT_NEAR(c[i * n + j], want, 1e-5 * std::abs(want) + 1e-7)
                  << "m=" << m << " n=" << n << " k=" << k << " at " << i << "," << j;
              // And within the quantisation's own error of the FP32 product.
              double exact = 0, mag = 0;
              for (int l = 0; l < k; ++l) {
                exact += double(a[i * k + l]) * b[j * k + l];
                mag += std::abs(a[i * k + l]) + std::abs(b[j * k + l]);
              }
              ASSERT_NEAR(c[i * n + j], exact, (qa.scale[i] + qb.scale[j]) * mag + 1e-6);
            }
          }
        }
      }
    }
  }
}

// Every micro-kernel this CPU can run, called directly on one panel in the documented layout,
// so that the kernels the dispatcher does not pick here (AVX-512 without BF16 or VNNI, as on
// CPUs that lack them) are checked too.
std::vector<std::pair<CpuKernelSet, bool>> RunnableKernels() {
  std::vector<std::pair<CpuKernelSet, bool>> out = {{CpuKernelSet::kPlain, false}};
  if (CpuFlag("avx2") && CpuFlag("fma")) out.push_back({CpuKernelSet::kAvx2, false});
  if (CpuFlag("avx512f") && CpuFlag("avx512vl") && CpuFlag("avx512bw") && CpuFlag("avx512dq")) {
    out.push_back({CpuKernelSet::kAvx512, false});
    out.push_back({CpuKernelSet::kAvx512, true});  // skipped per mode where the flag is absent
  }
  return out;
}

TEST(CpuQuantGemmTest, EveryBf16KernelEqualsDotProductsOnOnePanel) {
  for (const auto& [set, native] : RunnableKernels()) {
    if (native && !CpuFlag("avx512_bf16")) continue;
    const Bf16Table& table = Bf16TableFor(set, native);
    for (int k : {1, 2, 7, 64}) {
      const int k2 = (k + 1) / 2;
      const std::vector<float> a = Random(size_t(13) * k, 6), b = Random(size_t(kPanel) * k, 7);
      std::vector<uint16_t> panel(size_t(k2) * kPanel * 2, 0), pairs(size_t(13) * k2 * 2, 0);
      auto bits = [](float x) { return Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(x)); };
      for (int j = 0; j < kPanel; ++j) {
        for (int l = 0; l < k; ++l)
          panel[(l / 2) * kPanel * 2 + j * 2 + l % 2] = bits(b[j * k + l]);
      }
      for (int i = 0; i < 13; ++i) {
        for (int l = 0; l < k; ++l) pairs[i * k2 * 2 + l] = bits(a[i * k + l]);
      }
      for (int rows = 1; rows <= table.max_rows; ++rows) {
        for (int cols : {kPanel, 5}) {
          std::vector<float> c(size_t(rows) * kPanel, NAN);
          if (table.pairs_a) {
            table.by_rows[rows](pairs.data(), k2, panel.data(), k, c.data(), kPanel, cols);
          } else {
            table.by_rows[rows](a.data(), k, panel.data(), k, c.data(), kPanel, cols);
          }
          for (int i = 0; i < rows; ++i) {
            for (int j = 0; j < cols; ++j) {
              double want = 0, mag = 0;
              for (int l = 0; l < k; ++l) {
                const double x = table.pairs_a ? RoundBf16(a[i * k + l]) : a[i * k + l];
                want += x * RoundBf16(b[j * k + l]);
                mag += std::abs(x * RoundBf16(b[j * k + l]));
              }
              ASSERT_NEAR(c[i * kPanel + j], want, 1e-5 * mag + 1e-7)
                  << CpuKernelSetName(set) << (native ? " native" : "") << " rows=" << rows
                  << " k=" << k << " at " << i << "," << j;
            }
            if (cols < kPanel) {
              EXPECT_TRUE(std::isnan(c[i * kPanel + cols])) << "wrote past cols";
            }
          }
        }
      }
    }
  }
}

TEST(CpuQuantGemmTest, EveryInt8KernelEqualsIntegerDotProductsOnOnePanel) {
  std::mt19937 rng(8);
  for (const auto& [set, native] : RunnableKernels()) {
    if (native && !CpuFlag("avx512_vnni")) continue;
    const Int8Table& table = Int8TableFor(set, native);
    for (int k4 : {1, 3, 16}) {
      std::vector<int8_t> panel(size_t(k4) * kPanel * 4);
      std::vector<uint8_t> a(size_t(13) * k4 * 4);
      for (int8_t& w : panel) w = static_cast<int8_t>(int(rng() % 255) - 127);
      for (uint8_t& x : a) x = static_cast<uint8_t>(rng() % 256);
      std::vector<float> a_scale(13), w_scale(kPanel);
      std::vector<int32_t> a_zero(13), w_colsum(kPanel, 0);
      for (int i = 0; i < 13; ++i) {
        a_scale[i] = 0.01f * (i + 1);
        a_zero[i] = 7 * i;
      }
      for (int j = 0; j < kPanel; ++j) {
        w_scale[j] = 0.003f * (j + 1);
        for (int l = 0; l < 4 * k4; ++l) w_colsum[j] += panel[(l / 4) * kPanel * 4 + j * 4 + l % 4];
      }
      for (int rows = 1; rows <= table.max_rows; ++rows) {
        for (int cols : {kPanel, 5}) {
          std::vector<float> c(size_t(rows) * kPanel, NAN);
          const Int8Dequant dq{a_scale.data(), a_zero.data(), w_scale.data(), w_colsum.data()};
          table.by_rows[rows](a.data(), 4 * k4, panel.data(), k4, dq, c.data(), kPanel, cols);
          for (int i = 0; i < rows; ++i) {
            for (int j = 0; j < cols; ++j) {
              int64_t dot = 0;
              for (int l = 0; l < 4 * k4; ++l) {
                dot += (int64_t{a[i * 4 * k4 + l]} - a_zero[i]) *
                       panel[(l / 4) * kPanel * 4 + j * 4 + l % 4];
              }
              const double want = double(a_scale[i]) * w_scale[j] * double(dot);
              ASSERT_NEAR(c[i * kPanel + j], want, 1e-5 * std::abs(want) + 1e-6)
                  << CpuKernelSetName(set) << (native ? " native" : "") << " rows=" << rows
                  << " k4=" << k4 << " at " << i << "," << j;
            }
            if (cols < kPanel) {
              EXPECT_TRUE(std::isnan(c[i * kPanel + cols])) << "wrote past cols";
            }
          }
        }
      }
    }
  }
}

TEST(CpuQuantGemmTest, ReducedWeightsTakeTheirShareOfTheBytes) {
  const std::vector<float> b = Random(size_t(1024) * 512, 5);
  const int64_t fp32 = PackedWeights::Pack(b.data(), 512, 1024, 512, CpuWeights::kFp32).bytes();
  const int64_t bf16 = PackedWeights::Pack(b.data(), 512, 1024, 512, CpuWeights::kBf16).bytes();
  const int64_t int8 = PackedWeights::Pack(b.data(), 512, 1024, 512, CpuWeights::kInt8).bytes();
  EXPECT_EQ(fp32, 1024 * 512 * 4);
  EXPECT_EQ(bf16, fp32 / 2);
  EXPECT_EQ(int8, fp32 / 4 + 1024 * 8);  // + a scale and a column sum per output
}

}  // namespace
}  // namespace rnnserve::engine::cpu
