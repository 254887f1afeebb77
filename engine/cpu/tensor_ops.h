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
// Importers fold constant subgraphs through engine/tensor_op_eval.h, which runs EvalTensorOp.

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

// Evaluates the op over its operands, one per spec.operands entry (null where the operand is
// kAbsent). Fills `outputs` with plan::TensorOpOutputs(spec) tensors. kAttachLengths returns
// operand 0 unchanged (the lengths live beside tensors, in Value).
absl::Status EvalTensorOp(const TensorOpSpec& spec, absl::Span<const Tensor* const> operands,
                          std::vector<Tensor>* outputs);

// Runs a TensorOpSpec layer: resolves operands from `values` (the layer's inputs) and the
// spec's constants, evaluates, and writes the layer's outputs. Outputs carry no per-sequence
// lengths, except kAttachLengths, whose output carries operand 1's values (each in [0, T] for
// a [B, T, ...] operand 0).
absl::Status RunTensorOp(const TensorOpSpec& spec, const Layer& layer, std::vector<Value>* values);

// kAttachRequestLengths, kGatherAtLengths, kZeroPastLengths (engine/ir.h) of x under the
// request's `lengths` (empty: none given). EvalTensorOp runs them without lengths.
absl::Status EvalLengthsOp(const TensorOpSpec& spec, const Tensor& x,
                           absl::Span<const int32_t> lengths, Tensor* out);
// The same as a layer: lengths from the layer's input 1 (a sequence model input); for
// kAttachRequestLengths the output carries the shorter, per sequence, of those and input 0's.
absl::Status RunLengthsOp(const TensorOpSpec& spec, const Layer& layer, std::vector<Value>* values);

}  // namespace rnnserve::engine::cpu
