#pragma once

// CPU kernels that only move data: Flatten, Reshape, RepeatVector, and the merges of
// functional graphs (Concatenate, Add, Subtract, Multiply, Average, Maximum, Minimum).
//
// Masks, as Keras computes them: Flatten, Reshape and RepeatVector drop the mask; a merge keeps
// the AND of its inputs' masks (an input without a mask counts as all valid), which for
// length masks is the shortest length per sequence. Output shapes come from
// engine/plan/layer_plans.h, which the GPU engine shares.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/cpu/layers.h"
#include "engine/ir.h"

namespace rnnserve::engine::cpu {

// The Keras mask of a merge: the AND of the inputs' masks (reads only their masks).
void MergeMasks(const std::vector<const Value*>& in, Value* out);

// [B, ...] -> [B, prod(...)].
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
