#pragma once

// CPU forms of the generic tensor ops (TensorOpSpec in engine/ir.h), the ops ONNX graphs put
// around their recurrent layers.
//
// Semantics are those of the ONNX operator of the same name (opset 13+ forms; importers map
// older forms onto these): numpy broadcasting for elementwise ops and MatMul, negative axes
// counted from the end, Reshape's 0 (copy) and -1 (infer), Slice's clamping. Tensors are
// float32 or int64; shape arithmetic runs on int64. Every op checks its operands (ranks, dims,
// dtypes, index ranges) and returns INVALID_ARGUMENT naming the op and the expected value; no
// op allocates more than kMaxTensorOpElements elements.
//
// Importers also call EvalTensorOp to fold, at load, the ops whose operands are all constants.

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

// The largest tensor one op may produce (2^28 elements, 1 GiB of float32).
inline constexpr int64_t kMaxTensorOpElements = int64_t{1} << 28;

namespace tensor_ops {

// What a layout op does, computed from operand 0's shape and the op's int operands: each
// output element i (row-major over `shape`) is operand 0's element
// offset + sum over axes of idx[axis] * strides[axis].
struct StridedPlan {
  Shape shape;
  std::vector<int64_t> strides;
  int64_t offset = 0;
};

// Gather: output [outer, indices..., inner] from data [outer, n, inner]; indices made positive.
struct GatherPlan {
  Shape shape;
  int64_t outer = 1, n = 0, inner = 1;
  std::vector<int64_t> indices;
};

// Concat: each operand k adds a block of its size / outer elements to each of `outer` rows of
// `row` elements.
struct ConcatPlan {
  Shape shape;
  int64_t outer = 1, row = 0;
};

}  // namespace tensor_ops

// Checks the operand count and presence of EvalTensorOp's `operands` (where an entry may
// stand for a tensor held elsewhere: only null marks an absent operand).
absl::Status CheckOperands(const TensorOpSpec& spec, absl::Span<const Tensor* const> operands);

namespace tensor_ops {

// Squeeze, Unsqueeze, Reshape, Flatten: the output shape (the elements keep their order).
// `in` as EvalTensorOp's operands; in[0] is not read (its shape is `x`).
absl::StatusOr<Shape> RelabelShape(const TensorOpSpec& spec, const Shape& x,
                                   absl::Span<const Tensor* const> in);
// Transpose, Slice, Expand, Split (one plan per output); `in` as for RelabelShape.
absl::StatusOr<std::vector<StridedPlan>> PlanStrided(const TensorOpSpec& spec, const Shape& x,
                                                     absl::Span<const Tensor* const> in);
absl::StatusOr<GatherPlan> PlanGather(const TensorOpSpec& spec, const Shape& x,
                                      const Tensor& indices);
absl::StatusOr<ConcatPlan> PlanConcat(const TensorOpSpec& spec, absl::Span<const Shape> shapes,
                                      absl::Span<const DType> dtypes);

// MatMul of shapes a x b (numpy batch broadcasting; a 1-D operand is promoted to a matrix and
// its axis dropped from `out`): [..., M, K] x [..., K, N].
struct MatMulPlan {
  Shape abatch, bbatch, batch;  // the operands' batch axes and their broadcast
  int64_t M = 0, K = 0, N = 0;
  Shape out;
  bool a_vector = false, b_vector = false;
};
absl::StatusOr<MatMulPlan> PlanMatMul(TensorOpKind kind, const Shape& a, const Shape& b);

// Gemm: alpha * A' B' + beta * C with A' [M, K], B' [K, N] (after trans_a / trans_b); c is
// null without C, else C's shape, which must broadcast to [M, N].
struct GemmPlan {
  int64_t M = 0, K = 0, N = 0;
};
absl::StatusOr<GemmPlan> PlanGemm(const TensorOpSpec& spec, const Shape& a, const Shape& b,
                                  const Shape* c);

// ReduceMean/Sum/Max over spec.ints (empty: every axis).
struct ReducePlan {
  std::vector<bool> reduced;  // per axis of the input
  Shape out;                  // keep_dims: the input's rank, reduced axes 1
  int64_t count = 1;          // input elements reduced into each output element
};
absl::StatusOr<ReducePlan> PlanReduce(const TensorOpSpec& spec, const Shape& x);

}  // namespace tensor_ops

// Number of tensors the op produces (kSplit: one per part; every other op: one).
int TensorOpOutputs(const TensorOpSpec& spec);

// Evaluates the op over its operands, one per spec.operands entry (null where the operand is
// kAbsent). Fills `outputs` with TensorOpOutputs(spec) tensors. kAttachLengths returns operand
// 0 unchanged (the lengths live beside tensors, in Value).
absl::Status EvalTensorOp(const TensorOpSpec& spec, absl::Span<const Tensor* const> operands,
                          std::vector<Tensor>* outputs);

// kAttachLengths: operand 1 (`lens`) as the per-sequence lengths of an operand 0 of shape x
// [B, T, ...]; INVALID_ARGUMENT naming `layer` unless it is int64 [B] with values in [0, T].
absl::StatusOr<std::vector<int32_t>> AttachedLengths(const std::string& layer, const Shape& x,
                                                     const Tensor& lens);

// Runs a TensorOpSpec layer: resolves operands from `values` (the layer's inputs) and the
// spec's constants, evaluates, and writes the layer's outputs. Outputs carry no per-sequence
// lengths, except kAttachLengths, whose output carries operand 1's values (each in [0, T] for
// a [B, T, ...] operand 0).
absl::Status RunTensorOp(const TensorOpSpec& spec, const Layer& layer, std::vector<Value>* values);

}  // namespace rnnserve::engine::cpu
