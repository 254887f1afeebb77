#pragma once

// CPU kernels that only move data: Flatten, Reshape, RepeatVector, and the merges of
// functional graphs (Concatenate, Add, Subtract, Multiply, Average, Maximum, Minimum).
//
// Masks, as Keras computes them: Flatten, Reshape and RepeatVector drop the mask; a merge keeps
// the AND of its inputs' masks (an input without a mask counts as all valid), which for
// length masks is the shortest length per sequence.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/cpu/layers.h"
#include "engine/ir.h"

namespace rnnserve::engine::cpu {

// [B, ...] -> [B, prod(...)].
// Output shapes of Flatten and RepeatVector for an input of this type and shape (checked).
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
// The Keras mask of a merge: the AND of the inputs' masks (reads only their masks).
void MergeMasks(const std::vector<const Value*>& in, Value* out);

absl::Status RunFlatten(const std::string& name, const Value& in, Value* out);
// [B, ...] -> [B, target...]; one target entry may be -1.
absl::Status RunReshape(const ReshapeSpec& spec, const std::string& name, const Value& in,
                        Value* out);
// [B, C] -> [B, n, C].
absl::Status RunRepeatVector(const RepeatVectorSpec& spec, const std::string& name, const Value& in,
                             Value* out);
// Inputs of one rank. Concatenate: every axis but spec.axis equal. The element-wise merges:
// equal shapes, or axes of size 1 that broadcast (NumPy rules).
absl::Status RunMerge(const MergeSpec& spec, const std::string& name,
                      const std::vector<const Value*>& in, Value* out);

}  // namespace rnnserve::engine::cpu
