#pragma once

// Shape plans and checks of the Keras layers, shared by both engines (engine/cpu runs them on
// the host; engine/cuda plans its kernels with them), so both accept, reject and shape alike.
// Each check returns INVALID_ARGUMENT naming the layer `name` and the expected value.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/ir.h"
#include "engine/tensor.h"

namespace rnnserve::engine::plan {

// Flatten, Reshape, RepeatVector and merges ---------------------------------------------------

// Output shapes of Flatten ([B, ...] -> [B, prod(...)]) and RepeatVector ([B, C] -> [B, n, C])
// for an input of this type and shape (checked).
absl::StatusOr<Shape> FlattenShape(const std::string& name, const Shape& x);
absl::StatusOr<Shape> RepeatVectorShape(const RepeatVectorSpec& spec, const std::string& name,
                                        DType dtype, const Shape& x);
// Output shape of Reshape for input shape x; INVALID_ARGUMENT naming `name` when it does not fit.
absl::StatusOr<Shape> ReshapeLayerShape(const ReshapeSpec& spec, const std::string& name,
                                        const Shape& x);
// Output shape of a merge of inputs of these shapes and types (checks them).
absl::StatusOr<Shape> MergeShape(const MergeSpec& spec, const std::string& name,
                                 const std::vector<Shape>& shapes,
                                 const std::vector<DType>& dtypes);

// Conv1D and pooling on [B, T, C] ---------------------------------------------------------------
//
// Output lengths and padding follow Keras (TensorFlow's "VALID"/"SAME" rules):
//   valid:  T' = floor((T - span) / stride) + 1, span = (k - 1) * dilation + 1
//   same:   T' = ceil(T / stride), padded (span - 1 - ... ) with the smaller half on the left
//   causal: (Conv1D only) span - 1 zeros on the left, then valid.

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

// Softmax, BatchNormalization, LayerNormalization ---------------------------------------------

// The input checks; SoftmaxAxis gives the axis in [0, rank).
absl::Status CheckBatchNormInput(const BatchNormSpec& spec, const std::string& name, DType dtype,
                                 const Shape& x);
absl::Status CheckLayerNormInput(const LayerNormSpec& spec, const std::string& name, DType dtype,
                                 const Shape& x);
absl::StatusOr<int> SoftmaxAxis(const SoftmaxSpec& spec, const std::string& name, DType dtype,
                                const Shape& x);
// The moving statistics folded into y = x * scale + shift ([C] each), as Keras's inference
// path computes it.
void FoldBatchNorm(const BatchNormSpec& spec, std::vector<float>* scale, std::vector<float>* shift);

// Checks the parameter sizes of a normalisation layer against its channel count; used at
// compile so a bad file fails at load.
absl::Status ValidateBatchNorm(const BatchNormSpec& spec, const std::string& name);
absl::Status ValidateLayerNorm(const LayerNormSpec& spec, const std::string& name);

}  // namespace rnnserve::engine::plan
