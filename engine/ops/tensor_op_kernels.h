#pragma once

// What the tensor op files share (engine/tensor_op_eval.cc dispatches; tensor_ops_math.cc holds
// the arithmetic, tensor_ops_layout.cc the ops that move elements): typed access and each op's
// kernel on host tensors, over the shared plans of engine/plan. Part of the engine core: the CPU
// engine runs them, the GPU engine borrows them through the CPU engine's host fallback, and
// importers fold constants through them (engine/tensor_op_eval.h). Internal to engine/.

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/ir.h"
#include "engine/plan/tensor_op_plans.h"
#include "engine/tensor.h"
#include "engine/tensor_op_eval.h"

namespace rnnserve::engine::tensor_ops {

// The shared shape plans and shape arithmetic (engine/plan/tensor_op_plans.h), which the
// kernels below call unqualified.
using plan::Axis;
using plan::Bad;
using plan::Broadcast;
using plan::BroadcastStrides;
using plan::CheckedCount;
using plan::ConcatPlan;
using plan::GatherPlan;
using plan::GemmPlan;
using plan::Ints;
using plan::kMaxTensorOpElements;
using plan::MatMulPlan;
using plan::PlanConcat;
using plan::PlanGather;
using plan::PlanGemm;
using plan::PlanMatMul;
using plan::PlanReduce;
using plan::PlanSlice;
using plan::PlanStrided;
using plan::PlanTranspose;
using plan::ReducePlan;
using plan::RelabelShape;
using plan::ReshapeTarget;
using plan::StridedPlan;
using plan::Strides;

// An uninitialised tensor of `dtype` (float32 or int64).
Tensor Make(DType dtype, Shape shape);

// A new tensor of x's type and shape `os` filled by StridedCopy from x.
Tensor CopyStrided(const Tensor& x, const Shape& os, const std::vector<int64_t>& in_strides,
                   int64_t in_offset);
inline Tensor CopyStrided(const Tensor& x, const StridedPlan& plan) {
  return CopyStrided(x, plan.shape, plan.strides, plan.offset);
}

template <typename T>
const T* Data(const Tensor& t) {
  if constexpr (std::is_same_v<T, float>) {
    return t.f32();
  } else {
    return t.i64();
  }
}
template <typename T>
T* Data(Tensor& t) {
  if constexpr (std::is_same_v<T, float>) {
    return t.f32();
  } else {
    return t.i64();
  }
}

// Calls f(T{}) with T the tensor's element type.
template <typename F>
auto ByType(DType dtype, F&& f) {
  return dtype == DType::kFloat32 ? f(float{}) : f(int64_t{});
}

// Copies the elements of `in` selected by out position -> in offset, for layout ops.
// `in_strides[i]` is the input stride that output axis i walks.
template <typename T>
void StridedCopy(const T* in, const Shape& out_shape, const std::vector<int64_t>& in_strides,
                 int64_t in_offset, T* out) {
  const int rank = static_cast<int>(out_shape.size());
  const int64_t n = NumElements(out_shape);
  std::vector<int64_t> idx(rank, 0);
  int64_t off = in_offset;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = in[off];
    for (int a = rank - 1; a >= 0; --a) {
      if (++idx[a] < out_shape[a]) {
        off += in_strides[a];
        break;
      }
      off -= in_strides[a] * (out_shape[a] - 1);
      idx[a] = 0;
    }
  }
}

// Arithmetic (tensor_ops_math.cc).
absl::Status Binary(const TensorOpSpec& spec, const Tensor& a, const Tensor& b, Tensor* out);
absl::Status Unary(const TensorOpSpec& spec, const Tensor& x, Tensor* out);
absl::Status MatMul(TensorOpKind kind, const Tensor& a, const Tensor& b, Tensor* out);
absl::Status Gemm(const TensorOpSpec& spec, const Tensor& a, const Tensor& b, const Tensor* c,
                  Tensor* out);
absl::Status Cast(const TensorOpSpec& spec, const Tensor& x, Tensor* out);
absl::Status Softmax(const TensorOpSpec& spec, const Tensor& x, Tensor* out);
absl::Status Reduce(const TensorOpSpec& spec, const Tensor& x, Tensor* out);
absl::Status Range(const TensorOpSpec& spec, absl::Span<const Tensor* const> in, Tensor* out);

// Layout (tensor_ops_layout.cc), on the plans of engine/plan.
absl::Status Transpose(const TensorOpSpec& spec, const Tensor& x, Tensor* out);
absl::Status Gather(const TensorOpSpec& spec, const Tensor& x, const Tensor& indices, Tensor* out);
absl::Status Concat(const TensorOpSpec& spec, absl::Span<const Tensor* const> xs, Tensor* out);
absl::Status Slice(const TensorOpSpec& spec, absl::Span<const Tensor* const> in, Tensor* out);
}  // namespace rnnserve::engine::tensor_ops
