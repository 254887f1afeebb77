#pragma once

// CPU forms of the generic tensor ops (TensorOpSpec in engine/ir.h), the ops ONNX graphs put
// around their recurrent layers.
//
// Semantics are those of the ONNX operator of the same name (opset 13+ forms; importers map
// older forms onto these): numpy broadcasting for elementwise ops and MatMul, negative axes
// counted from the end, Reshape's 0 (copy) and -1 (infer), Slice's clamping. Tensors are
// float32 or int64; shape arithmetic runs on int64. Every op checks its operands (ranks, dims,
// dtypes, index ranges) and returns INVALID_ARGUMENT naming the op and the expected value; no
// op allocates more than plan::kMaxTensorOpElements elements. Shapes are planned by
// engine/plan/tensor_op_plans.h, which the GPU engine shares.
//
// The ops themselves, on host tensors, are in the engine core (engine/tensor_op_eval.h,
// engine/ops/), where importers fold constant subgraphs through them too.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/cpu/layers.h"
#include "engine/ir.h"
#include "engine/tensor.h"

namespace rnnserve::engine::cpu {

// Runs a TensorOpSpec layer: resolves operands from `values` (the layer's inputs) and the
// spec's constants, evaluates, and writes the layer's outputs. Outputs carry no per-sequence
// lengths, except kAttachLengths, whose output carries operand 1's values (each in [0, T] for
// a [B, T, ...] operand 0).
absl::Status RunTensorOp(const TensorOpSpec& spec, const Layer& layer, std::vector<Value>* values);

// The request-lengths ops (engine/ops/lengths_ops.h) as a layer: lengths from the layer's input 1
// (a sequence model input); for kAttachRequestLengths the output carries the shorter, per sequence,
// of those and input 0's.
absl::Status RunLengthsOp(const TensorOpSpec& spec, const Layer& layer, std::vector<Value>* values);

}  // namespace rnnserve::engine::cpu
