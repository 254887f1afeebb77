#pragma once

// CPU kernels for Softmax, BatchNormalization and LayerNormalization (inference forms).
// Each keeps its input's mask, as Keras does (all three support masking).

#include <string>

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/cpu/layers.h"
#include "engine/ir.h"

namespace rnnserve::engine::cpu {

// Softmax over spec.axis (negative counts from the end) of a float tensor of any rank.
absl::Status RunSoftmax(const SoftmaxSpec& spec, const std::string& name, const Value& in,
                        Value* out);

// y = gamma * (x - mean) / sqrt(var + epsilon) + beta over the last axis.
absl::Status RunBatchNorm(const BatchNormSpec& spec, const std::string& name, const Value& in,
                          Value* out);

// Per row of the last axis: y = gamma * (x - mean(x)) / sqrt(var(x) + epsilon) + beta.
absl::Status RunLayerNorm(const LayerNormSpec& spec, const std::string& name, const Value& in,
                          Value* out);

// What the GPU engine shares with these kernels: each check returns INVALID_ARGUMENT naming
// `name` and the expected input; SoftmaxAxis gives the axis in [0, rank).
absl::Status CheckBatchNormInput(const BatchNormSpec& spec, const std::string& name, DType dtype,
                                 const Shape& x);
absl::Status CheckLayerNormInput(const LayerNormSpec& spec, const std::string& name, DType dtype,
                                 const Shape& x);
absl::StatusOr<int> SoftmaxAxis(const SoftmaxSpec& spec, const std::string& name, DType dtype,
                                const Shape& x);
// The moving statistics folded into y = x * scale + shift ([C] each), as Keras's inference
// path computes it.
void FoldBatchNorm(const BatchNormSpec& spec, std::vector<float>* scale, std::vector<float>* shift);

// Checks the parameter sizes of a normalisation layer against its channel count; used by
// Compile so a bad file fails at load.
absl::Status ValidateBatchNorm(const BatchNormSpec& spec, const std::string& name);
absl::Status ValidateLayerNorm(const LayerNormSpec& spec, const std::string& name);

}  // namespace rnnserve::engine::cpu
