#pragma once

// The tolerances of every GPU test, defined once. Each is what one engine path's rounding
// allows against its reference; a test states which path it checks by the constant it uses.

#include "engine/engine.h"
#include "gtest/gtest.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {

struct Tolerance {
  double rtol;
  double atol;
};

// Exact FP32 on both sides with the same summation order per output (one instance against
// another, a framework's FP32 fixtures on small models): rounding only.
inline constexpr Tolerance kFp32Exact{1e-5, 1e-6};
// Exact FP32 on the GPU against the CPU engine (or a fixture past kFp32Exact): cuBLAS/cuDNN
// sum in another order than the CPU engine's GEMMs.
inline constexpr Tolerance kFp32CrossEngine{1e-4, 1e-5};

// Relative L2 error bounds of the reduced-precision math modes against exact FP32, for the
// small models of the GPU tests (H <= 128, T <= 50): one rounding of inputs and weights carried
// through the recurrence. TF32 rounds GEMM inputs to 10 mantissa bits, FP16 stores data and
// weights in 10, BF16 in 7; all accumulate in FP32.
struct ReducedPrecisionBound {
  engine::MathMode mode;
  const char* name;
  double relative_l2;
};
inline constexpr ReducedPrecisionBound kReducedPrecisionBounds[] = {
    {engine::MathMode::kTf32, "TF32", 5e-3},
    {engine::MathMode::kFp16, "FP16", 5e-3},
    {engine::MathMode::kBf16, "BF16", 3e-2}};

// AllClose (tests/support/fixtures.h) under one of the tolerances above.
inline ::testing::AssertionResult AllClose(const engine::Tensor& got, const client::NpyArray& want,
                                           const Tolerance& tol) {
  return AllClose(got, want, tol.rtol, tol.atol);
}

}  // namespace rnnserve::testing
