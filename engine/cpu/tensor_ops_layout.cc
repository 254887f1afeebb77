#include "engine/cpu/tensor_op_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rnnserve::engine::cpu::tensor_ops {

absl::Status Transpose(const TensorOpSpec& spec, const Tensor& x, Tensor* out) {
  const int rank = x.rank();
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
  const auto st = Strides(x.shape());
  Shape os(rank);
  std::vector<int64_t> in_strides(rank);
  for (int i = 0; i < rank; ++i) {
    os[i] = x.dim(perm[i]);
    in_strides[i] = st[perm[i]];
  }
  *out = CopyStrided(x, os, in_strides, 0);
  return absl::OkStatus();
}

absl::Status Gather(const TensorOpSpec& spec, const Tensor& x, const Tensor& indices, Tensor* out) {
  if (indices.dtype() != DType::kInt64) return Bad(spec.kind, "indices must be integers");
  if (x.rank() == 0) return Bad(spec.kind, "data must have rank >= 1");
  auto axis = Axis(spec.kind, spec.axis, x.rank());
  if (!axis.ok()) return axis.status();
  const int64_t n = x.dim(*axis);
  Shape os(x.shape().begin(), x.shape().begin() + *axis);
  os.insert(os.end(), indices.shape().begin(), indices.shape().end());
  os.insert(os.end(), x.shape().begin() + *axis + 1, x.shape().end());
  if (auto c = CheckedCount(spec.kind, os); !c.ok()) return c.status();
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < *axis; ++i) outer *= x.dim(i);
  for (int i = *axis + 1; i < x.rank(); ++i) inner *= x.dim(i);
  const int64_t ni = indices.num_elements();
  for (int64_t idx : indices.ints()) {
    if (idx < -n || idx >= n) {
      return Bad(spec.kind, absl::StrCat("index ", idx, " outside [", -n, ", ", n, ")"));
    }
  }
  *out = Make(x.dtype(), os);
  ByType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = Data<T>(x);
    T* dst = Data<T>(*out);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < ni; ++j) {
        int64_t idx = indices.ints()[j];
        if (idx < 0) idx += n;
        std::copy_n(src + (o * n + idx) * inner, inner, dst + (o * ni + j) * inner);
      }
    }
    return 0;
  });
  return absl::OkStatus();
}

absl::Status Concat(const TensorOpSpec& spec, absl::Span<const Tensor* const> xs, Tensor* out) {
  if (xs.empty()) return Bad(spec.kind, "needs at least one operand");
  const Tensor& first = *xs[0];
  auto axis = Axis(spec.kind, spec.axis, first.rank());
  if (!axis.ok()) return axis.status();
  Shape os = first.shape();
  os[*axis] = 0;
  for (const Tensor* x : xs) {
    bool same = x->rank() == first.rank() && x->dtype() == first.dtype();
    for (int i = 0; same && i < x->rank(); ++i) {
      same = i == *axis || x->dim(i) == first.dim(i);
    }
    if (!same) {
      return Bad(spec.kind, absl::StrCat("operand ", ShapeString(x->shape()), " does not match ",
                                         ShapeString(first.shape()), " off axis ", *axis));
    }
    os[*axis] += x->dim(*axis);
  }
  if (auto c = CheckedCount(spec.kind, os); !c.ok()) return c.status();
  *out = Make(first.dtype(), os);
  int64_t outer = 1;
  for (int i = 0; i < *axis; ++i) outer *= os[i];
  const int64_t row = NumElements(os) / std::max<int64_t>(outer, 1);
  ByType(first.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* dst = Data<T>(*out);
    int64_t at = 0;
    for (const Tensor* x : xs) {
      const int64_t chunk = x->num_elements() / std::max<int64_t>(outer, 1);
      for (int64_t o = 0; o < outer; ++o) {
        std::copy_n(Data<T>(*x) + o * chunk, chunk, dst + o * row + at);
      }
      at += chunk;
    }
    return 0;
  });
  return absl::OkStatus();
}

absl::Status Slice(const TensorOpSpec& spec, absl::Span<const Tensor* const> in, Tensor* out) {
  const Tensor& x = *in[0];
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
  const int rank = x.rank();
  Shape os = x.shape();
  std::vector<int64_t> begin(rank, 0), step(rank, 1);
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < n; ++i) {
    auto axis = Axis(spec.kind, axes->empty() ? static_cast<int64_t>(i) : (*axes)[i], rank);
    if (!axis.ok()) return axis.status();
    if (seen[*axis]) return Bad(spec.kind, "an axis repeats");
    seen[*axis] = true;
    const int64_t dim = x.dim(*axis);
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
  const auto st = Strides(x.shape());
  int64_t offset = 0;
  std::vector<int64_t> in_strides(rank);
  for (int i = 0; i < rank; ++i) {
    offset += begin[i] * st[i];
    in_strides[i] = st[i] * step[i];
  }
  *out = CopyStrided(x, os, in_strides, offset);
  return absl::OkStatus();
}

absl::StatusOr<Shape> ReshapeTarget(const TensorOpSpec& spec, const Tensor& x,
                                    const std::vector<int64_t>& target) {
  Shape os(target.size());
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t d = target[i];
    if (d == 0 && !spec.allow_zero) {
      if (i >= x.shape().size()) return Bad(spec.kind, "0 copies an axis the input lacks");
      d = x.dim(static_cast<int>(i));
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
    if (known == 0 || x.num_elements() % known != 0) {
      return Bad(spec.kind, absl::StrCat("cannot infer -1 reshaping ", ShapeString(x.shape()),
                                         " to ", ShapeString(target)));
    }
    os[infer] = x.num_elements() / known;
  }
  if (NumElements(os) != x.num_elements()) {
    return Bad(spec.kind, absl::StrCat("cannot reshape ", ShapeString(x.shape()), " to ",
                                       ShapeString(target)));
  }
  return os;
}

absl::Status Squeeze(const TensorOpSpec& spec, const Tensor& x, std::vector<int64_t> axes,
                     Tensor* out) {
  std::vector<bool> drop(x.rank(), false);
  for (int64_t a : axes) {
    auto axis = Axis(spec.kind, a, x.rank());
    if (!axis.ok()) return axis.status();
    if (x.dim(*axis) != 1) {
      return Bad(spec.kind, absl::StrCat("axis ", a, " of ", ShapeString(x.shape()), " is not 1"));
    }
    drop[*axis] = true;
  }
  Shape os;
  for (int i = 0; i < x.rank(); ++i) {
    if (axes.empty() ? x.dim(i) != 1 : !drop[i]) os.push_back(x.dim(i));
  }
  *out = x;
  out->Reshape(os);
  return absl::OkStatus();
}

absl::Status Unsqueeze(const TensorOpSpec& spec, const Tensor& x, std::vector<int64_t> axes,
                       Tensor* out) {
  const int rank = x.rank() + static_cast<int>(axes.size());
  std::vector<bool> ins(rank, false);
  for (int64_t a : axes) {
    auto axis = Axis(spec.kind, a, rank);
    if (!axis.ok()) return axis.status();
    if (ins[*axis]) return Bad(spec.kind, "an axis repeats");
    ins[*axis] = true;
  }
  Shape os;
  int j = 0;
  for (int i = 0; i < rank; ++i) os.push_back(ins[i] ? 1 : x.dim(j++));
  *out = x;
  out->Reshape(os);
  return absl::OkStatus();
}

absl::Status Expand(const TensorOpSpec& spec, const Tensor& x, const std::vector<int64_t>& target,
                    Tensor* out) {
  auto os = Broadcast(spec.kind, x.shape(), target);
  if (!os.ok()) return os.status();
  if (auto c = CheckedCount(spec.kind, *os); !c.ok()) return c.status();
  *out = CopyStrided(x, *os, BroadcastStrides(x.shape(), *os), 0);
  return absl::OkStatus();
}

absl::Status Split(const TensorOpSpec& spec, const Tensor& x, std::vector<Tensor>* outs) {
  auto axis = Axis(spec.kind, spec.axis, x.rank());
  if (!axis.ok()) return axis.status();
  const int64_t dim = x.dim(*axis);
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
  int64_t at = 0;
  for (int64_t s : sizes) {
    const Tensor start = Tensor::Int64({1}, {at}), end = Tensor::Int64({1}, {at + s}),
                 axes = Tensor::Int64({1}, {*axis});
    const Tensor* ops[] = {&x, &start, &end, &axes};
    outs->emplace_back();
    if (auto st = Slice({.kind = TensorOpKind::kSlice}, ops, &outs->back()); !st.ok()) return st;
    at += s;
  }
  return absl::OkStatus();
}

}  // namespace rnnserve::engine::cpu::tensor_ops
