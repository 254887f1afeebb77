// Shape arithmetic of the tensor-op plans, and the operand checks both engines run first.

#include "engine/plan/tensor_op_plans.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/lengths.h"

namespace rnnserve::engine::plan {

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

// An int64 vector operand (shape, axes, indices...).
absl::StatusOr<std::vector<int64_t>> Ints(TensorOpKind kind, const Tensor* t, const char* what) {
  if (t == nullptr) return std::vector<int64_t>{};
  if (t->dtype() != DType::kInt64 || t->rank() > 1) {
    return Bad(kind, absl::StrCat(what, " must be a 1-D int64 tensor, got ", DTypeName(t->dtype()),
                                  " ", ShapeString(t->shape())));
  }
  return std::vector<int64_t>(t->ints().begin(), t->ints().end());
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

int TensorOpOutputs(const TensorOpSpec& spec) {
  if (spec.kind != TensorOpKind::kSplit) return 1;
  return spec.ints.empty() ? spec.num_outputs : static_cast<int>(spec.ints.size());
}

absl::Status CheckOperands(const TensorOpSpec& spec, absl::Span<const Tensor* const> in) {
  static constexpr int kMinOperands[] = {1, 1, 2, 1, 1, 1, 3, 1, 2, 2, 1, 1, 2, 2,
                                         2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1,
                                         1, 1, 1, 1, 1, 1, 1, 3, 2, 2, 2, 2};
  static_assert(std::size(kMinOperands) == static_cast<size_t>(TensorOpKind::kZeroPastLengths) + 1);
  const int need = kMinOperands[static_cast<int>(spec.kind)];
  const bool variadic = spec.kind == TensorOpKind::kConcat;
  if (static_cast<int>(in.size()) < need) {
    return Bad(spec.kind, absl::StrCat("expects ", need, " operands, got ", in.size()));
  }
  for (int i = 0; i < need || (variadic && i < static_cast<int>(in.size())); ++i) {
    if (in[i] == nullptr) return Bad(spec.kind, absl::StrCat("operand ", i, " is missing"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> AttachedLengths(const std::string& layer, const Shape& x,
                                                     const Tensor& lens) {
  const int64_t batch = x.empty() ? 0 : x[0];
  if (x.size() < 2 || lens.dtype() != DType::kInt64 || lens.rank() != 1 || lens.dim(0) != batch) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", layer, "': sequence lengths ",
                                                   ShapeString(lens.shape()),
                                                   " do not match a batch of ", batch));
  }
  std::vector<int32_t> lengths;
  for (int64_t len : lens.ints()) {  // clamped into int32: still outside [0, T] if it was
    lengths.push_back(
        static_cast<int32_t>(std::clamp<int64_t>(len, -1, std::numeric_limits<int32_t>::max())));
  }
  if (auto st =
          CheckLengths(lengths, batch, x[1], absl::StrCat("layer '", layer, "': sequence lengths"));
      !st.ok()) {
    return st;
  }
  return lengths;
}

}  // namespace rnnserve::engine::plan
