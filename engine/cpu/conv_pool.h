#pragma once

// CPU kernels for the time-axis convolution and pooling layers, on [B, T, C] inputs.
//
// Output lengths and padding follow Keras (TensorFlow's "VALID"/"SAME" rules):
//   valid:  T' = floor((T - span) / stride) + 1, span = (k - 1) * dilation + 1
//   same:   T' = ceil(T / stride), padded (span - 1 - ... ) with the smaller half on the left
//   causal: (Conv1D only) span - 1 zeros on the left, then valid.
// Masks: Conv1D and the local pools drop the mask (Keras does not propagate it);
// GlobalAveragePooling1D averages the valid steps only; GlobalMaxPooling1D takes the maximum
// over every step, as Keras does (it ignores the mask).

#include <string>

#include "absl/status/status.h"
#include "engine/cpu/layers.h"
#include "engine/ir.h"

namespace rnnserve::engine::cpu {

// A window of `span` steps moved by `stride` over `t` steps: how many outputs, and how many
// padding steps before step 0 (SAME: half the total, floor; causal: span - 1).
struct Window {
  int64_t out_len = 0;
  int64_t pad_left = 0;
};
Window PlanWindow(int64_t t, int64_t span, int64_t stride, bool same, bool causal);
Window Conv1DWindow(const Conv1DSpec& spec, int64_t t);

// INVALID_ARGUMENT naming `name` unless x is FP32 [B, T, channels] (channels 0: any).
absl::Status CheckSequence(const std::string& name, const Tensor& x, int64_t channels);
absl::Status CheckSequence(const std::string& name, DType dtype, const Shape& x, int64_t channels);

absl::Status ValidateConv1D(const Conv1DSpec& spec, const std::string& name);
absl::Status ValidatePool1D(const Pool1DSpec& spec, const std::string& name);

absl::Status RunConv1D(const Conv1DSpec& spec, const std::string& name, const Value& in,
                       Value* out);
absl::Status RunPool1D(const Pool1DSpec& spec, const std::string& name, const Value& in,
                       Value* out);
// [B, T, C] -> [B, C].
absl::Status RunGlobalPool1D(const GlobalPool1DSpec& spec, const std::string& name, const Value& in,
                             Value* out);

}  // namespace rnnserve::engine::cpu
