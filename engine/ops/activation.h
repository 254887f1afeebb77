#pragma once

#include <algorithm>
#include <cmath>

#include "engine/ir.h"

namespace rnnserve::engine {

// Scalar form of every activation a recurrent cell or dense layer can carry (not softmax).
inline float Activate(const Activation& a, float x) {
  switch (a.kind) {
    case ActivationKind::kLinear:
      return x;
    case ActivationKind::kSigmoid:
      return 1.0f / (1.0f + std::exp(-x));
    case ActivationKind::kTanh:
      return std::tanh(x);
    case ActivationKind::kRelu:
      return x > 0.0f ? x : 0.0f;
    case ActivationKind::kHardSigmoid:
      return std::clamp(a.alpha * x + a.beta, 0.0f, 1.0f);
    case ActivationKind::kLeakyRelu:
      return x >= 0.0f ? x : a.alpha * x;
    case ActivationKind::kThresholdedRelu:
      return x > a.alpha ? x : 0.0f;
    case ActivationKind::kScaledTanh:
      return a.alpha * std::tanh(a.beta * x);
    case ActivationKind::kAffine:
      return a.alpha * x + a.beta;
    case ActivationKind::kElu:
      return x >= 0.0f ? x : a.alpha * (std::exp(x) - 1.0f);
    case ActivationKind::kSoftsign:
      return x / (1.0f + std::fabs(x));
    case ActivationKind::kSoftplus:
      return x > 20.0f ? x : std::log1p(std::exp(x));
    case ActivationKind::kSelu: {
      constexpr float kAlpha = 1.6732632423543772f, kScale = 1.0507009873554805f;
      return kScale * (x > 0.0f ? x : kAlpha * (std::exp(x) - 1.0f));
    }
    case ActivationKind::kGelu:
      return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
    case ActivationKind::kSwish:
      return x / (1.0f + std::exp(-x));
    case ActivationKind::kExponential:
      return std::exp(x);
    case ActivationKind::kSoftmax:
      return x;  // handled over a whole row by SoftmaxRows
  }
  return x;
}

inline void ActivateInPlace(const Activation& a, float* x, int n) {
  switch (a.kind) {
    case ActivationKind::kLinear:
      return;
    case ActivationKind::kSigmoid:
      for (int i = 0; i < n; ++i) x[i] = 1.0f / (1.0f + std::exp(-x[i]));
      return;
    case ActivationKind::kTanh:
      for (int i = 0; i < n; ++i) x[i] = std::tanh(x[i]);
      return;
    default:
      for (int i = 0; i < n; ++i) x[i] = Activate(a, x[i]);
  }
}

// Numerically stable softmax over each of `rows` rows of `cols` values.
inline void SoftmaxRows(float* x, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * cols;
    const float m = *std::max_element(row, row + cols);
    float sum = 0.0f;
    for (int64_t c = 0; c < cols; ++c) {
      row[c] = std::exp(row[c] - m);
      sum += row[c];
    }
    for (int64_t c = 0; c < cols; ++c) row[c] /= sum;
  }
}

}  // namespace rnnserve::engine
