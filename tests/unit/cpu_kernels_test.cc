// The CPU engine's kernel sets (engine/cpu/panel_gemm.h, gate_kernels.h): which one runs, that
// the panel GEMM of the one that runs equals plain dot products, and that every set's gate pass
// equals the scalar formulas (std::exp, std::tanh) the sets are approximations of. ctest runs this
// binary once per set (RNNSERVE_CPU_KERNELS=amx|avx512|avx2|plain, tests/unit/cpu.cmake) beside
// the default run, and once with amx forced on every CPU (the refusal where it lacks AMX).

#include "engine/cpu/panel_gemm.h"

#include "engine/cpu/gate_kernels.h"

#include <algorithm>
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
  if (set == CpuKernelSet::kAvx512 || set == CpuKernelSet::kAmx) {
    needs = {"avx512f", "avx512vl", "avx512bw", "avx512dq", "fma"};
  }
  if (set == CpuKernelSet::kAmx) {
    for (const char* f : {"amx_tile", "amx_bf16", "amx_int8"}) needs.push_back(f);
  }
  if (set == CpuKernelSet::kAvx2) needs = {"avx2", "fma"};
  for (const std::string& f : needs) {
    if (!flags.count(f)) return false;
  }
  return true;
}

TEST(CpuKernelsTest, BestSetIsTheWidestTheCpuHas) {
  const CpuKernelSet best = BestCpuKernelSet();
  EXPECT_TRUE(Supports(best));
  if (Supports(CpuKernelSet::kAmx)) {
    EXPECT_EQ(best, CpuKernelSet::kAmx);
  } else if (Supports(CpuKernelSet::kAvx512)) {
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
  for (CpuKernelSet set :
       {CpuKernelSet::kAmx, CpuKernelSet::kAvx512, CpuKernelSet::kAvx2, CpuKernelSet::kPlain}) {
    if (std::string(forced) != CpuKernelSetName(set)) continue;
    if (!Supports(set)) {
      // Refused, naming the variable and the set, and what this CPU has instead.
      EXPECT_EQ(active.status().code(), absl::StatusCode::kFailedPrecondition);
      const std::string message(active.status().message());
      EXPECT_NE(message.find(std::string("RNNSERVE_CPU_KERNELS=") + forced), std::string::npos)
          << message;
      EXPECT_NE(message.find(std::string(CpuKernelSetName(BestCpuKernelSet())) + " is the best"),
                std::string::npos)
          << message;
      GTEST_SKIP() << "this CPU lacks the " << forced << " set: " << message;
    }
    ASSERT_TRUE(active.ok()) << active.status();
    EXPECT_EQ(*active, set);
    return;
  }
  EXPECT_EQ(active.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(active.status().message().find("must be amx, avx512, avx2 or plain"), std::string::npos)
      << active.status();
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

// Inputs over the whole range a gate sees: saturated, near zero (tanh's |x| < 4e-4 branch), the
// exp clamps, and every length tail (n mod 16).
std::vector<float> GateInputs(int n, std::mt19937& rng) {
  std::uniform_real_distribution<float> wide(-12.0f, 12.0f), narrow(-1e-3f, 1e-3f);
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = (i % 5 == 0) ? narrow(rng) : wide(rng);
  if (n > 2) {
    x[0] = -100.0f;
    x[1] = 100.0f;
  }
  return x;
}

TEST(CpuKernelsTest, EveryGateKernelSetEqualsTheScalarFormulas) {
  std::mt19937 rng(11);
  for (CpuKernelSet set :
       {CpuKernelSet::kAmx, CpuKernelSet::kAvx512, CpuKernelSet::kAvx2, CpuKernelSet::kPlain}) {
    if (!Supports(set)) continue;
    SCOPED_TRACE(CpuKernelSetName(set));
    const GateKernels& k = GateKernelsFor(set);
    for (int n : {1, 3, 4, 7, 8, 15, 16, 17, 33, 100}) {
      SCOPED_TRACE(n);
      const std::vector<float> x = GateInputs(n, rng), y = GateInputs(n, rng),
                               z = GateInputs(n, rng), w = GateInputs(n, rng);
      // Within a few float ulp of the result, or of the largest term where terms cancel.
      auto near = [](float got, double want, double scale = 0) {
        return std::fabs(got - want) <= 4e-7 + 4e-7 * std::max(std::fabs(want), scale);
      };
      struct Case {
        ActivationKind kind;
        double (*f)(double);
      };
      for (const Case& c :
           {Case{ActivationKind::kSigmoid, [](double v) { return 1 / (1 + std::exp(-v)); }},
            Case{ActivationKind::kTanh, [](double v) { return std::tanh(v); }},
            Case{ActivationKind::kRelu, [](double v) { return v > 0 ? v : 0.0; }},
            Case{ActivationKind::kSoftsign, [](double v) { return v / (1 + std::fabs(v)); }}}) {
        std::vector<float> got = x;
        Activation a;
        a.kind = c.kind;
        k.activate(a, got.data(), n);
        for (int i = 0; i < n; ++i) {
          ASSERT_TRUE(near(got[i], c.f(x[i]))) << "activation " << int(c.kind) << " of " << x[i]
                                               << ": " << got[i] << " vs " << c.f(x[i]);
        }
      }
      Activation hard;
      hard.kind = ActivationKind::kHardSigmoid;
      hard.alpha = 0.2f;
      hard.beta = 0.5f;
      std::vector<float> got = x;
      k.activate(hard, got.data(), n);
      for (int i = 0; i < n; ++i) {
        ASSERT_TRUE(near(got[i], std::clamp(0.2 * x[i] + 0.5, 0.0, 1.0))) << x[i];
      }
      got = x;
      k.clip(got.data(), n, 3.0f);
      for (int i = 0; i < n; ++i) ASSERT_EQ(got[i], std::clamp(x[i], -3.0f, 3.0f));
      got = x;
      k.clip(got.data(), n, 0.0f);  // no clip
      ASSERT_EQ(got, x);
      // The element-wise updates, each against its formula in double.
      got = x;
      k.add(got.data(), y.data(), n);
      for (int i = 0; i < n; ++i) ASSERT_TRUE(near(got[i], double(x[i]) + y[i]));
      got = x;
      k.add_mul(got.data(), y.data(), z.data(), n);
      for (int i = 0; i < n; ++i)
        ASSERT_TRUE(
            near(got[i], x[i] + double(y[i]) * z[i], std::fabs(x[i]) + std::fabs(y[i] * z[i])));
      k.mul(got.data(), y.data(), z.data(), n);
      for (int i = 0; i < n; ++i) ASSERT_TRUE(near(got[i], double(y[i]) * z[i]));
      k.one_minus(got.data(), y.data(), n);
      for (int i = 0; i < n; ++i) ASSERT_TRUE(near(got[i], 1.0 - y[i]));
      got = x;  // c
      k.lstm_cell(got.data(), y.data(), z.data(), w.data(), n);
      for (int i = 0; i < n; ++i) {
        ASSERT_TRUE(near(got[i], double(z[i]) * x[i] + double(y[i]) * w[i],
                         std::fabs(z[i] * x[i]) + std::fabs(y[i] * w[i])));
      }
      got = w;  // out aliases h
      k.gru_blend(got.data(), x.data(), y.data(), got.data(), n);
      for (int i = 0; i < n; ++i) {
        ASSERT_TRUE(near(got[i], (1.0 - x[i]) * y[i] + double(x[i]) * w[i],
                         std::fabs((1.0 - x[i]) * y[i]) + std::fabs(x[i] * w[i])));
      }
      got = x;  // cand
      k.gru_candidate(got.data(), y.data(), z.data(), w.data(), n);
      for (int i = 0; i < n; ++i) {
        ASSERT_TRUE(near(got[i], y[i] + double(z[i]) * (double(x[i]) + w[i]),
                         std::fabs(y[i]) + std::fabs(z[i]) * (std::fabs(x[i]) + std::fabs(w[i]))));
      }
    }
  }
}

// A NaN input (a client's bad data) stays NaN through every activation, as it does in Keras.
TEST(CpuKernelsTest, GateActivationsKeepNaN) {
  for (CpuKernelSet set :
       {CpuKernelSet::kAmx, CpuKernelSet::kAvx512, CpuKernelSet::kAvx2, CpuKernelSet::kPlain}) {
    if (!Supports(set)) continue;
    SCOPED_TRACE(CpuKernelSetName(set));
    for (ActivationKind kind : {ActivationKind::kSigmoid, ActivationKind::kTanh}) {
      std::vector<float> x(19, 0.5f);
      x[3] = x[18] = std::nanf("");
      Activation a;
      a.kind = kind;
      GateKernelsFor(set).activate(a, x.data(), static_cast<int>(x.size()));
      EXPECT_TRUE(std::isnan(x[3]) && std::isnan(x[18])) << int(kind);
      EXPECT_FALSE(std::isnan(x[4])) << int(kind);
    }
  }
}

TEST(CpuKernelsTest, ActiveGateKernelsAreTheActiveSets) {
  const auto active = ActiveCpuKernelSet();
  if (!active.ok()) GTEST_SKIP() << active.status();
  EXPECT_EQ(&ActiveGateKernels(), &GateKernelsFor(*active));
}

}  // namespace
}  // namespace rnnserve::engine::cpu
