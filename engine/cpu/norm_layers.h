#pragma once

// CPU kernels for Softmax, BatchNormalization and LayerNormalization (inference forms).
// Each keeps its input's mask, as Keras does (all three support masking). Input checks and
// the batch-norm folding come from engine/plan/layer_plans.h, which the GPU engine shares.

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

}  // namespace rnnserve::engine::cpu
