#pragma once

// CPU kernels for the time-axis convolution and pooling layers, on [B, T, C] inputs.
//
// Output lengths and padding follow Keras (TensorFlow's "VALID"/"SAME" rules):
//   valid:  T' = floor((T - span) / stride) + 1, span = (k - 1) * dilation + 1
//   same:   T' = ceil(T / stride), padded (span - 1 - ... ) with the smaller half on the left
//   causal: (Conv1D only) span - 1 zeros on the left, then valid.
// Masks: Conv1D and the local pools drop the mask (Keras does not propagate it);
// GlobalAveragePooling1D averages the valid steps only; GlobalMaxPooling1D takes the maximum
// over every step, as Keras does (it ignores the mask). Windows and checks come from
// engine/plan/layer_plans.h, which the GPU engine shares.

#include <string>

#include "absl/status/status.h"
#include "engine/cpu/layers.h"
#include "engine/ir.h"

namespace rnnserve::engine::cpu {

absl::Status RunConv1D(const Conv1DSpec& spec, const std::string& name, const Value& in,
                       Value* out);
absl::Status RunPool1D(const Pool1DSpec& spec, const std::string& name, const Value& in,
                       Value* out);
// [B, T, C] -> [B, C].
absl::Status RunGlobalPool1D(const GlobalPool1DSpec& spec, const std::string& name, const Value& in,
                             Value* out);

}  // namespace rnnserve::engine::cpu
