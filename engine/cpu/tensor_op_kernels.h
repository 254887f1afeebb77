#pragma once

// What the tensor op files share (tensor_ops.cc dispatches; tensor_ops_math.cc holds the
// arithmetic, tensor_ops_layout.cc the ops that move elements): operand checks, shape
// arithmetic, typed access, and each op's kernel. Internal to engine/cpu.

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/cpu/tensor_ops.h"

namespace rnnserve::engine::cpu::tensor_ops {

// INVALID_ARGUMENT naming the op.
absl::Status Bad(TensorOpKind kind, const std::string& what);

// Element count of `shape`, or an error when a dim is negative or the count is too large.
absl::StatusOr<int64_t> CheckedCount(TensorOpKind kind, const Shape& shape);

// Row-major strides of `shape`.
std::vector<int64_t> Strides(const Shape& shape);

// Normalises a possibly negative axis into [0, rank).
absl::StatusOr<int> Axis(TensorOpKind kind, int64_t axis, int rank);

// An uninitialised tensor of `dtype` (float32 or int64).
Tensor Make(DType dtype, Shape shape);

// An int64 vector operand (shape, axes, indices...); empty when t is null.
absl::StatusOr<std::vector<int64_t>> Ints(TensorOpKind kind, const Tensor* t, const char* what);

// A new tensor of x's type and shape `os` filled by StridedCopy from x.
Tensor CopyStrided(const Tensor& x, const Shape& os, const std::vector<int64_t>& in_strides,
                   int64_t in_offset);
inline Tensor CopyStrided(const Tensor& x, const StridedPlan& plan) {
  return CopyStrided(x, plan.shape, plan.strides, plan.offset);
}

// Numpy broadcast of two shapes.
absl::StatusOr<Shape> Broadcast(TensorOpKind kind, const Shape& a, const Shape& b);

// Strides of `shape` seen from a broadcast `out` shape (0 along broadcast axes).
std::vector<int64_t> BroadcastStrides(const Shape& shape, const Shape& out);

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

// Layout (tensor_ops_layout.cc). The plans need only operand 0's shape, so the GPU engine
// runs the same plans on device data.
absl::Status Transpose(const TensorOpSpec& spec, const Tensor& x, Tensor* out);
absl::Status Gather(const TensorOpSpec& spec, const Tensor& x, const Tensor& indices, Tensor* out);
absl::Status Concat(const TensorOpSpec& spec, absl::Span<const Tensor* const> xs, Tensor* out);
absl::Status Slice(const TensorOpSpec& spec, absl::Span<const Tensor* const> in, Tensor* out);
absl::StatusOr<Shape> ReshapeTarget(const TensorOpSpec& spec, const Shape& x,
                                    const std::vector<int64_t>& target);
absl::StatusOr<StridedPlan> PlanTranspose(const TensorOpSpec& spec, const Shape& x);
absl::StatusOr<StridedPlan> PlanSlice(const TensorOpSpec& spec, const Shape& x,
                                      absl::Span<const Tensor* const> in);

}  // namespace rnnserve::engine::cpu::tensor_ops
