#include "engine/cpu/tensor_op_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rnnserve::engine::cpu::tensor_ops {

absl::Status Bad(TensorOpKind kind, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(TensorOpName(kind), ": ", what));
}

// Element count of `shape`, or an error when a dim is negative or the count is too large.
absl::StatusOr<int64_t> CheckedCount(TensorOpKind kind, const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return Bad(kind, absl::StrCat("negative dimension in ", ShapeString(shape)));
    if (d != 0 && n > kMaxTensorOpElements / d) {
      return Bad(kind, absl::StrCat("shape ", ShapeString(shape), " exceeds ", kMaxTensorOpElements,
                                    " elements"));
    }
    n *= d;
  }
  return n;
}

std::vector<int64_t> Strides(const Shape& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

// Normalises a possibly negative axis into [0, rank).
absl::StatusOr<int> Axis(TensorOpKind kind, int64_t axis, int rank) {
  if (axis < -rank || axis >= rank) {
    return Bad(kind, absl::StrCat("axis ", axis, " outside [", -rank, ", ", rank, ")"));
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

Tensor Make(DType dtype, Shape shape) {
  return dtype == DType::kFloat32 ? Tensor::Float(std::move(shape))
                                  : Tensor::Int64(std::move(shape));
}

// An int64 vector operand (shape, axes, indices...).
absl::StatusOr<std::vector<int64_t>> Ints(TensorOpKind kind, const Tensor* t, const char* what) {
  if (t == nullptr) return std::vector<int64_t>{};
  if (t->dtype() != DType::kInt64 || t->rank() > 1) {
    return Bad(kind, absl::StrCat(what, " must be a 1-D int64 tensor, got ", DTypeName(t->dtype()),
                                  " ", ShapeString(t->shape())));
  }
  return std::vector<int64_t>(t->ints().begin(), t->ints().end());
}

// A new tensor of x's type and shape `os` filled by StridedCopy from x.
Tensor CopyStrided(const Tensor& x, const Shape& os, const std::vector<int64_t>& in_strides,
                   int64_t in_offset) {
  Tensor out = Make(x.dtype(), os);
  if (out.num_elements() == 0) return out;
  ByType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    StridedCopy<T>(Data<T>(x), os, in_strides, in_offset, Data<T>(out));
    return 0;
  });
  return out;
}

// Numpy broadcast of two shapes.
absl::StatusOr<Shape> Broadcast(TensorOpKind kind, const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    const int64_t db = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1) {
      return Bad(kind, absl::StrCat("shapes ", ShapeString(a), " and ", ShapeString(b),
                                    " do not broadcast"));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Strides of `shape` seen from a broadcast `out` shape (0 along broadcast axes).
std::vector<int64_t> BroadcastStrides(const Shape& shape, const Shape& out) {
  std::vector<int64_t> s(out.size(), 0);
  const std::vector<int64_t> own = Strides(shape);
  const size_t lead = out.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) s[lead + i] = shape[i] == 1 ? 0 : own[i];
  return s;
}

}  // namespace rnnserve::engine::cpu::tensor_ops
