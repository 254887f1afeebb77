#pragma once

// Shape plans of the generic tensor ops (TensorOpSpec in engine/ir.h), shared by both engines:
// the CPU engine's kernels (engine/cpu/tensor_ops*) and the GPU engine's tensor-op runner
// (engine/cuda/device_tensor_ops.cc) plan with these and move elements as a plan says, so both
// accept, reject and shape alike.
//
// Semantics are those of the ONNX operator of the same name (opset 13+ forms): numpy
// broadcasting, negative axes counted from the end, Reshape's 0 (copy) and -1 (infer), Slice's
// clamping. A plan reads shapes and the op's INT64 operands (shapes, axes, indices), never
// FP32 data. Errors are INVALID_ARGUMENT naming the op and the expected value; no plan admits
// a tensor of more than kMaxTensorOpElements elements.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/ir.h"
#include "engine/tensor.h"

namespace rnnserve::engine::plan {

// The largest tensor one op may produce (2^28 elements, 1 GiB of float32).
inline constexpr int64_t kMaxTensorOpElements = int64_t{1} << 28;

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

// Number of tensors the op produces (kSplit: one per part; every other op: one).
int TensorOpOutputs(const TensorOpSpec& spec);

// Checks the operand count and presence of an op's `operands` (one per spec.operands entry,
// where an entry may stand for a tensor held elsewhere: only null marks an absent operand).
absl::Status CheckOperands(const TensorOpSpec& spec, absl::Span<const Tensor* const> operands);

// kAttachLengths: operand 1 (`lens`) as the per-sequence lengths of an operand 0 of shape x
// [B, T, ...]; INVALID_ARGUMENT naming `layer` unless it is int64 [B] with values in [0, T].
absl::StatusOr<std::vector<int32_t>> AttachedLengths(const std::string& layer, const Shape& x,
                                                     const Tensor& lens);

// kGatherAtLengths, kZeroPastLengths: operand 0 of shape x viewed as
// [outer, n0, mid, n1, inner] around its batch and time axes (n0 is the one that comes first),
// and the lengths the op applies (T for each sequence when the request gives none; each checked
// to be in [0, T]).
struct LengthsOpPlan {
  Shape out;
  int64_t outer = 1, mid = 1, inner = 1, B = 0, T = 0;
  bool time_first = false;  // the time axis comes before the batch axis
  std::vector<int32_t> lengths;
};
absl::StatusOr<LengthsOpPlan> PlanLengthsOp(const TensorOpSpec& spec, const Shape& x,
                                            absl::Span<const int32_t> lengths);

// Squeeze, Unsqueeze, Reshape, Flatten: the output shape (the elements keep their order).
// `in` as CheckOperands's operands; in[0] is not read (its shape is `x`).
absl::StatusOr<Shape> RelabelShape(const TensorOpSpec& spec, const Shape& x,
                                   absl::Span<const Tensor* const> in);
// Transpose, Slice, Expand, Split (one plan per output); `in` as for RelabelShape.
absl::StatusOr<std::vector<StridedPlan>> PlanStrided(const TensorOpSpec& spec, const Shape& x,
                                                     absl::Span<const Tensor* const> in);
absl::StatusOr<StridedPlan> PlanTranspose(const TensorOpSpec& spec, const Shape& x);
absl::StatusOr<StridedPlan> PlanSlice(const TensorOpSpec& spec, const Shape& x,
                                      absl::Span<const Tensor* const> in);
absl::StatusOr<GatherPlan> PlanGather(const TensorOpSpec& spec, const Shape& x,
                                      const Tensor& indices);
absl::StatusOr<ConcatPlan> PlanConcat(const TensorOpSpec& spec, absl::Span<const Shape> shapes,
                                      absl::Span<const DType> dtypes);
// Reshape's target (0 copies the input's dim, one -1 is inferred) for an input of shape x.
absl::StatusOr<Shape> ReshapeTarget(const TensorOpSpec& spec, const Shape& x,
                                    const std::vector<int64_t>& target);

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

// Shape arithmetic the plans and kernels share.
// INVALID_ARGUMENT naming the op.
absl::Status Bad(TensorOpKind kind, const std::string& what);
// Element count of `shape`, or an error when a dim is negative or the count is too large.
absl::StatusOr<int64_t> CheckedCount(TensorOpKind kind, const Shape& shape);
// Row-major strides of `shape`.
std::vector<int64_t> Strides(const Shape& shape);
// Normalises a possibly negative axis into [0, rank).
absl::StatusOr<int> Axis(TensorOpKind kind, int64_t axis, int rank);
// An int64 vector operand (shape, axes, indices...); empty when t is null.
absl::StatusOr<std::vector<int64_t>> Ints(TensorOpKind kind, const Tensor* t, const char* what);
// Numpy broadcast of two shapes.
absl::StatusOr<Shape> Broadcast(TensorOpKind kind, const Shape& a, const Shape& b);
// Strides of `shape` seen from a broadcast `out` shape (0 along broadcast axes).
std::vector<int64_t> BroadcastStrides(const Shape& shape, const Shape& out);

}  // namespace rnnserve::engine::plan
