// Plans of the ops that move elements: Transpose, Slice, Expand, Split, Gather, Concat, and
// the relabelling ops (Squeeze, Unsqueeze, Reshape, Flatten).

#include "engine/plan/tensor_op_plans.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rnnserve::engine::plan {

absl::StatusOr<StridedPlan> PlanTranspose(const TensorOpSpec& spec, const Shape& x) {
  const int rank = static_cast<int>(x.size());
  std::vector<int64_t> perm = spec.ints;
  if (perm.empty()) {
    perm.resize(rank);
    std::iota(perm.rbegin(), perm.rend(), 0);
  }
  std::vector<bool> seen(rank, false);
  if (static_cast<int>(perm.size()) != rank) {
    return Bad(spec.kind, absl::StrCat("perm has ", perm.size(), " axes for rank ", rank));
  }
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p]) return Bad(spec.kind, "perm is not a permutation");
    seen[p] = true;
  }
  const auto st = Strides(x);
  StridedPlan plan;
  plan.shape.resize(rank);
  plan.strides.resize(rank);
  for (int i = 0; i < rank; ++i) {
    plan.shape[i] = x[perm[i]];
    plan.strides[i] = st[perm[i]];
  }
  return plan;
}

absl::StatusOr<GatherPlan> PlanGather(const TensorOpSpec& spec, const Shape& x,
                                      const Tensor& indices) {
  if (indices.dtype() != DType::kInt64) return Bad(spec.kind, "indices must be integers");
  const int rank = static_cast<int>(x.size());
  if (rank == 0) return Bad(spec.kind, "data must have rank >= 1");
  auto axis = Axis(spec.kind, spec.axis, rank);
  if (!axis.ok()) return axis.status();
  GatherPlan plan;
  plan.n = x[*axis];
  plan.shape.assign(x.begin(), x.begin() + *axis);
  plan.shape.insert(plan.shape.end(), indices.shape().begin(), indices.shape().end());
  plan.shape.insert(plan.shape.end(), x.begin() + *axis + 1, x.end());
  if (auto c = CheckedCount(spec.kind, plan.shape); !c.ok()) return c.status();
  for (int i = 0; i < *axis; ++i) plan.outer *= x[i];
  for (int i = *axis + 1; i < rank; ++i) plan.inner *= x[i];
  for (int64_t idx : indices.ints()) {
    if (idx < -plan.n || idx >= plan.n) {
      return Bad(spec.kind, absl::StrCat("index ", idx, " outside [", -plan.n, ", ", plan.n, ")"));
    }
    plan.indices.push_back(idx < 0 ? idx + plan.n : idx);
  }
  return plan;
}

absl::StatusOr<ConcatPlan> PlanConcat(const TensorOpSpec& spec, absl::Span<const Shape> shapes,
                                      absl::Span<const DType> dtypes) {
  if (shapes.empty()) return Bad(spec.kind, "needs at least one operand");
  const Shape& first = shapes[0];
  const int rank = static_cast<int>(first.size());
  auto axis = Axis(spec.kind, spec.axis, rank);
  if (!axis.ok()) return axis.status();
  ConcatPlan plan;
  plan.shape = first;
  plan.shape[*axis] = 0;
  for (size_t k = 0; k < shapes.size(); ++k) {
    const Shape& x = shapes[k];
    bool same = static_cast<int>(x.size()) == rank && dtypes[k] == dtypes[0];
    for (int i = 0; same && i < rank; ++i) same = i == *axis || x[i] == first[i];
    if (!same) {
      return Bad(spec.kind, absl::StrCat("operand ", ShapeString(x), " does not match ",
                                         ShapeString(first), " off axis ", *axis));
    }
    plan.shape[*axis] += x[*axis];
  }
  if (auto c = CheckedCount(spec.kind, plan.shape); !c.ok()) return c.status();
  for (int i = 0; i < *axis; ++i) plan.outer *= plan.shape[i];
  plan.row = NumElements(plan.shape) / std::max<int64_t>(plan.outer, 1);
  return plan;
}

absl::StatusOr<StridedPlan> PlanSlice(const TensorOpSpec& spec, const Shape& x,
                                      absl::Span<const Tensor* const> in) {
  auto starts = Ints(spec.kind, in[1], "starts");
  auto ends = Ints(spec.kind, in[2], "ends");
  auto axes = Ints(spec.kind, in.size() > 3 ? in[3] : nullptr, "axes");
  auto steps = Ints(spec.kind, in.size() > 4 ? in[4] : nullptr, "steps");
  for (const auto* s : {&starts, &ends, &axes, &steps}) {
    if (!s->ok()) return s->status();
  }
  const size_t n = starts->size();
  if (ends->size() != n || (!axes->empty() && axes->size() != n) ||
      (!steps->empty() && steps->size() != n)) {
    return Bad(spec.kind, "starts, ends, axes and steps differ in length");
  }
  const int rank = static_cast<int>(x.size());
  Shape os = x;
  std::vector<int64_t> begin(rank, 0), step(rank, 1);
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < n; ++i) {
    auto axis = Axis(spec.kind, axes->empty() ? static_cast<int64_t>(i) : (*axes)[i], rank);
    if (!axis.ok()) return axis.status();
    if (seen[*axis]) return Bad(spec.kind, "an axis repeats");
    seen[*axis] = true;
    const int64_t dim = x[*axis];
    const int64_t st = steps->empty() ? 1 : (*steps)[i];
    if (st == 0) return Bad(spec.kind, "step 0");
    int64_t b = (*starts)[i], e = (*ends)[i];
    if (b < 0) b = b < -dim ? 0 : b + dim;
    if (e < 0) e = e < -dim ? -1 : e + dim;
    if (st > 0) {
      b = std::clamp<int64_t>(b, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      os[*axis] = e > b ? (e - b + st - 1) / st : 0;
    } else {
      b = std::clamp<int64_t>(b, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      os[*axis] = b > e ? (b - e - st - 1) / -st : 0;
    }
    begin[*axis] = b;
    step[*axis] = st;
  }
  const auto st = Strides(x);
  StridedPlan plan;
  plan.shape = std::move(os);
  plan.strides.resize(rank);
  for (int i = 0; i < rank; ++i) {
    plan.offset += begin[i] * st[i];
    plan.strides[i] = st[i] * step[i];
  }
  return plan;
}

absl::StatusOr<Shape> ReshapeTarget(const TensorOpSpec& spec, const Shape& x,
                                    const std::vector<int64_t>& target) {
  const int64_t count = NumElements(x);
  Shape os(target.size());
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t d = target[i];
    if (d == 0 && !spec.allow_zero) {
      if (i >= x.size()) return Bad(spec.kind, "0 copies an axis the input lacks");
      d = x[i];
    }
    if (d == -1) {
      if (infer >= 0) return Bad(spec.kind, "more than one -1 in the target shape");
      infer = static_cast<int>(i);
      continue;
    }
    if (d < 0) return Bad(spec.kind, absl::StrCat("target dimension ", d));
    os[i] = d;
    if (d != 0 && known > kMaxTensorOpElements / d) return Bad(spec.kind, "target too large");
    known *= d;
  }
  if (infer >= 0) {
    if (known == 0 || count % known != 0) {
      return Bad(spec.kind, absl::StrCat("cannot infer -1 reshaping ", ShapeString(x), " to ",
                                         ShapeString(target)));
    }
    os[infer] = count / known;
  }
  if (NumElements(os) != count) {
    return Bad(spec.kind,
               absl::StrCat("cannot reshape ", ShapeString(x), " to ", ShapeString(target)));
  }
  return os;
}

absl::StatusOr<Shape> SqueezeShape(const TensorOpSpec& spec, const Shape& x,
                                   const std::vector<int64_t>& axes) {
  const int rank = static_cast<int>(x.size());
  std::vector<bool> drop(rank, false);
  for (int64_t a : axes) {
    auto axis = Axis(spec.kind, a, rank);
    if (!axis.ok()) return axis.status();
    if (x[*axis] != 1) {
      return Bad(spec.kind, absl::StrCat("axis ", a, " of ", ShapeString(x), " is not 1"));
    }
    drop[*axis] = true;
  }
  Shape os;
  for (int i = 0; i < rank; ++i) {
    if (axes.empty() ? x[i] != 1 : !drop[i]) os.push_back(x[i]);
  }
  return os;
}

absl::StatusOr<Shape> UnsqueezeShape(const TensorOpSpec& spec, const Shape& x,
                                     const std::vector<int64_t>& axes) {
  const int rank = static_cast<int>(x.size() + axes.size());
  std::vector<bool> ins(rank, false);
  for (int64_t a : axes) {
    auto axis = Axis(spec.kind, a, rank);
    if (!axis.ok()) return axis.status();
    if (ins[*axis]) return Bad(spec.kind, "an axis repeats");
    ins[*axis] = true;
  }
  Shape os;
  size_t j = 0;
  for (int i = 0; i < rank; ++i) os.push_back(ins[i] ? 1 : x[j++]);
  return os;
}

absl::StatusOr<Shape> RelabelShape(const TensorOpSpec& spec, const Shape& x,
                                   absl::Span<const Tensor* const> in) {
  switch (spec.kind) {
    case TensorOpKind::kSqueeze:
    case TensorOpKind::kUnsqueeze: {
      std::vector<int64_t> axes = spec.ints;
      if (in.size() > 1 && in[1] != nullptr) {
        auto v = Ints(spec.kind, in[1], "axes");
        if (!v.ok()) return v.status();
        axes = *v;
      }
      return spec.kind == TensorOpKind::kSqueeze ? SqueezeShape(spec, x, axes)
                                                 : UnsqueezeShape(spec, x, axes);
    }
    case TensorOpKind::kReshape: {
      auto target = Ints(spec.kind, in[1], "shape");
      if (!target.ok()) return target.status();
      return ReshapeTarget(spec, x, *target);
    }
    case TensorOpKind::kFlatten: {
      auto axis = Axis(spec.kind, spec.axis, static_cast<int>(x.size()) + 1);
      if (!axis.ok()) return axis.status();
      int64_t outer = 1;
      for (int i = 0; i < *axis; ++i) outer *= x[i];
      return Shape{outer, outer == 0 ? 0 : NumElements(x) / outer};
    }
    default:
      return Bad(spec.kind, "does not only relabel its operand");
  }
}

absl::StatusOr<StridedPlan> PlanExpand(const TensorOpSpec& spec, const Shape& x,
                                       const std::vector<int64_t>& target) {
  auto os = Broadcast(spec.kind, x, target);
  if (!os.ok()) return os.status();
  if (auto c = CheckedCount(spec.kind, *os); !c.ok()) return c.status();
  StridedPlan plan;
  plan.strides = BroadcastStrides(x, *os);
  plan.shape = std::move(*os);
  return plan;
}

absl::StatusOr<std::vector<StridedPlan>> PlanSplit(const TensorOpSpec& spec, const Shape& x) {
  auto axis = Axis(spec.kind, spec.axis, static_cast<int>(x.size()));
  if (!axis.ok()) return axis.status();
  const int64_t dim = x[*axis];
  std::vector<int64_t> sizes = spec.ints;
  if (sizes.empty()) {
    const int64_t parts = spec.num_outputs;
    if (parts <= 0) return Bad(spec.kind, "needs at least one output");
    const int64_t each = (dim + parts - 1) / parts;
    for (int64_t p = 0, left = dim; p < parts; ++p, left -= each) {
      sizes.push_back(std::clamp<int64_t>(left, 0, each));
    }
  }
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) return Bad(spec.kind, "negative split size");
    total += s;
  }
  if (total != dim) {
    return Bad(spec.kind, absl::StrCat("split sizes sum to ", total, ", axis has ", dim));
  }
  std::vector<StridedPlan> plans;
  int64_t at = 0;
  for (int64_t s : sizes) {
    const Tensor start = Tensor::Int64({1}, {at}), end = Tensor::Int64({1}, {at + s}),
                 axes = Tensor::Int64({1}, {*axis});
    const Tensor* ops[] = {nullptr, &start, &end, &axes};
    auto plan = PlanSlice({.kind = TensorOpKind::kSlice}, x, ops);
    if (!plan.ok()) return plan.status();
    plans.push_back(std::move(*plan));
    at += s;
  }
  return plans;
}

absl::StatusOr<std::vector<StridedPlan>> PlanStrided(const TensorOpSpec& spec, const Shape& x,
                                                     absl::Span<const Tensor* const> in) {
  absl::StatusOr<StridedPlan> one;
  switch (spec.kind) {
    case TensorOpKind::kTranspose:
      one = PlanTranspose(spec, x);
      break;
    case TensorOpKind::kSlice:
      one = PlanSlice(spec, x, in);
      break;
    case TensorOpKind::kExpand: {
      auto target = Ints(spec.kind, in[1], "shape");
      if (!target.ok()) return target.status();
      one = PlanExpand(spec, x, *target);
      break;
    }
    case TensorOpKind::kSplit:
      return PlanSplit(spec, x);
    default:
      return Bad(spec.kind, "is not a strided copy");
  }
  if (!one.ok()) return one.status();
  return std::vector<StridedPlan>{std::move(*one)};
}

}  // namespace rnnserve::engine::plan
