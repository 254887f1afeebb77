#pragma once

// The activations of engine/cpu/activation.h as device functions, one for one, so that the
// GPU engine's kernels compute the same functions as the CPU engine. CUDA only (.cu files).

#include "engine/cuda/kernels.h"

namespace rnnserve::engine::cuda {

// Values of engine::ActivationKind.
enum : int {
  kLinear,
  kSigmoid,
  kTanh,
  kRelu,
  kHardSigmoid,
  kLeakyRelu,
  kThresholdedRelu,
  kScaledTanh,
  kAffine,
  kElu,
  kSoftsign,
  kSoftplus,
  kSelu,
  kGelu,
  kSwish,
  kExponential,
  kSoftmax,
};

__device__ __forceinline__ float Activate(const DeviceActivation& a, float x) {
  switch (a.kind) {
    case kLinear:
      return x;
    case kSigmoid:
      return 1.0f / (1.0f + expf(-x));
    case kTanh:
      return tanhf(x);
    case kRelu:
      return x > 0.0f ? x : 0.0f;
    case kHardSigmoid:
      return fminf(fmaxf(a.alpha * x + a.beta, 0.0f), 1.0f);
    case kLeakyRelu:
      return x >= 0.0f ? x : a.alpha * x;
    case kThresholdedRelu:
      return x > a.alpha ? x : 0.0f;
    case kScaledTanh:
      return a.alpha * tanhf(a.beta * x);
    case kAffine:
      return a.alpha * x + a.beta;
    case kElu:
      return x >= 0.0f ? x : a.alpha * (expf(x) - 1.0f);
    case kSoftsign:
      return x / (1.0f + fabsf(x));
    case kSoftplus:
      return x > 20.0f ? x : log1pf(expf(x));
    case kSelu: {
      const float alpha = 1.6732632423543772f, scale = 1.0507009873554805f;
      return scale * (x > 0.0f ? x : alpha * (expf(x) - 1.0f));
    }
    case kGelu:
      return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case kSwish:
      return x / (1.0f + expf(-x));
    case kExponential:
      return expf(x);
    default:
      return x;
  }
}

}  // namespace rnnserve::engine::cuda
