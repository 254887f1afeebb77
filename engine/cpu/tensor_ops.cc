#include "engine/cpu/tensor_ops.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/cpu/activation.h"

namespace rnnserve::engine {

std::string TensorOpName(TensorOpKind kind) {
  static const char* const kNames[] = {
      "Constant",     "Shape",     "Gather",     "Concat",     "Unsqueeze", "Squeeze",
      "Slice",        "Transpose", "Reshape",    "Expand",     "Cast",      "ConstantOfShape",
      "Add",          "Sub",       "Mul",        "Div",        "Pow",       "Min",
      "Max",          "MatMul",    "Gemm",       "Activation", "Neg",       "Abs",
      "Sqrt",         "Exp",       "Log",        "Reciprocal", "Softmax",   "LogSoftmax",
      "Flatten",      "Split",     "ReduceMean", "ReduceSum",  "ReduceMax", "Range",
      "AttachLengths"};
  const size_t i = static_cast<size_t>(kind);
  return i < std::size(kNames) ? kNames[i] : "?";
}

namespace cpu {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

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

// An int64 vector operand (shape, axes, indices...).
absl::StatusOr<std::vector<int64_t>> Ints(TensorOpKind kind, const Tensor* t, const char* what) {
  if (t == nullptr) return std::vector<int64_t>{};
  if (t->dtype() != DType::kInt64 || t->rank() > 1) {
    return Bad(kind, absl::StrCat(what, " must be a 1-D int64 tensor, got ", DTypeName(t->dtype()),
                                  " ", ShapeString(t->shape())));
  }
  return std::vector<int64_t>(t->ints().begin(), t->ints().end());
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

template <typename T>
T ApplyBinary(TensorOpKind kind, T x, T y) {
  switch (kind) {
    case TensorOpKind::kAdd:
      return x + y;
    case TensorOpKind::kSub:
      return x - y;
    case TensorOpKind::kMul:
      return x * y;
    case TensorOpKind::kDiv:
      if constexpr (std::is_same_v<T, int64_t>) {
        return y == 0 ? 0 : x / y;
      } else {
        return x / y;
      }
    case TensorOpKind::kPow:
      return static_cast<T>(std::pow(static_cast<double>(x), static_cast<double>(y)));
    case TensorOpKind::kMin:
      return std::min(x, y);
    case TensorOpKind::kMax:
      return std::max(x, y);
    default:
      return x;
  }
}

absl::Status Binary(const TensorOpSpec& spec, const Tensor& a, const Tensor& b, Tensor* out) {
  if (a.dtype() != b.dtype()) {
    return Bad(spec.kind, absl::StrCat("operand types differ: ", DTypeName(a.dtype()), " and ",
                                       DTypeName(b.dtype())));
  }
  auto shape = Broadcast(spec.kind, a.shape(), b.shape());
  if (!shape.ok()) return shape.status();
  if (auto n = CheckedCount(spec.kind, *shape); !n.ok()) return n.status();
  *out = Make(a.dtype(), *shape);
  ByType(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* pa = Data<T>(a);
    const T* pb = Data<T>(b);
    T* po = Data<T>(*out);
    const int64_t n = out->num_elements();
    if (a.shape() == b.shape()) {
      for (int64_t i = 0; i < n; ++i) po[i] = ApplyBinary(spec.kind, pa[i], pb[i]);
      return 0;
    }
    const Shape& os = out->shape();
    const int rank = static_cast<int>(os.size());
    const auto sa = BroadcastStrides(a.shape(), os), sb = BroadcastStrides(b.shape(), os);
    std::vector<int64_t> idx(rank, 0);
    int64_t oa = 0, ob = 0;
    for (int64_t i = 0; i < n; ++i) {
      po[i] = ApplyBinary(spec.kind, pa[oa], pb[ob]);
      for (int ax = rank - 1; ax >= 0; --ax) {
        if (++idx[ax] < os[ax]) {
          oa += sa[ax];
          ob += sb[ax];
          break;
        }
        oa -= sa[ax] * (os[ax] - 1);
        ob -= sb[ax] * (os[ax] - 1);
        idx[ax] = 0;
      }
    }
    return 0;
  });
  return absl::OkStatus();
}

float ApplyUnary(TensorOpKind kind, float x) {
  switch (kind) {
    case TensorOpKind::kNeg:
      return -x;
    case TensorOpKind::kAbs:
      return std::fabs(x);
    case TensorOpKind::kSqrt:
      return std::sqrt(x);
    case TensorOpKind::kExp:
      return std::exp(x);
    case TensorOpKind::kLog:
      return std::log(x);
    case TensorOpKind::kReciprocal:
      return 1.0f / x;
    default:
      return x;
  }
}

absl::Status Unary(const TensorOpSpec& spec, const Tensor& x, Tensor* out) {
  *out = x;
  if (x.dtype() == DType::kInt64) {
    if (spec.kind != TensorOpKind::kNeg && spec.kind != TensorOpKind::kAbs) {
      return Bad(spec.kind, "expects a float tensor, got INT64");
    }
    for (int64_t& v : absl::Span<int64_t>(out->i64(), out->num_elements())) {
      v = spec.kind == TensorOpKind::kNeg ? -v : std::abs(v);
    }
    return absl::OkStatus();
  }
  float* p = out->f32();
  const int64_t n = out->num_elements();
  if (spec.kind == TensorOpKind::kActivation) {
    for (int64_t i = 0; i < n; ++i) p[i] = Activate(spec.activation, p[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) p[i] = ApplyUnary(spec.kind, p[i]);
  }
  return absl::OkStatus();
}

// [..., M, K] x [..., K, N] with numpy batch broadcasting and 1-D promotion.
absl::Status MatMul(TensorOpKind kind, const Tensor& a, const Tensor& b, Tensor* out) {
  if (a.dtype() != DType::kFloat32 || b.dtype() != DType::kFloat32) {
    return Bad(kind, "expects float operands");
  }
  if (a.rank() == 0 || b.rank() == 0) return Bad(kind, "operands must have rank >= 1");
  Shape as = a.shape(), bs = b.shape();
  const bool a1 = as.size() == 1, b1 = bs.size() == 1;
  if (a1) as.insert(as.begin(), 1);
  if (b1) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  if (bs[bs.size() - 2] != K) {
    return Bad(kind, absl::StrCat("inner dimensions differ: ", ShapeString(a.shape()), " x ",
                                  ShapeString(b.shape())));
  }
  const Shape abatch(as.begin(), as.end() - 2), bbatch(bs.begin(), bs.end() - 2);
  auto batch = Broadcast(kind, abatch, bbatch);
  if (!batch.ok()) return batch.status();
  Shape os = *batch;
  os.push_back(M);
  os.push_back(N);
  if (auto n = CheckedCount(kind, os); !n.ok()) return n.status();
  Shape final_shape = *batch;
  if (!a1) final_shape.push_back(M);
  if (!b1) final_shape.push_back(N);
  *out = Tensor::Float(final_shape);
  const int64_t nb = NumElements(*batch);
  const auto sa = BroadcastStrides(abatch, *batch), sb = BroadcastStrides(bbatch, *batch);
  const auto ob = Strides(*batch);
  for (int64_t i = 0; i < nb; ++i) {
    int64_t oa = 0, obb = 0, rem = i;
    for (size_t ax = 0; ax < batch->size(); ++ax) {
      const int64_t k = rem / ob[ax];
      rem %= ob[ax];
      oa += k * sa[ax];
      obb += k * sb[ax];
    }
    Eigen::Map<const RowMat> A(a.f32() + oa * M * K, M, K);   // [M, K]
    Eigen::Map<const RowMat> B(b.f32() + obb * K * N, K, N);  // [K, N]
    Eigen::Map<RowMat> Y(out->f32() + i * M * N, M, N);       // [M, N]
    Y.noalias() = A * B;
  }
  return absl::OkStatus();
}

absl::Status Transpose(const TensorOpSpec& spec, const Tensor& x, Tensor* out);

// alpha * A' B' + beta * C, with A' = A or its transpose (trans_a), likewise B'.
absl::Status Gemm(const TensorOpSpec& spec, const Tensor& a, const Tensor& b, const Tensor* c,
                  Tensor* out) {
  if (a.rank() != 2 || b.rank() != 2) {
    return Bad(spec.kind, absl::StrCat("expects 2-D A and B, got ", ShapeString(a.shape()), " and ",
                                       ShapeString(b.shape())));
  }
  Tensor at = a, bt = b, y, scaled;
  const TensorOpSpec transpose{.kind = TensorOpKind::kTranspose};
  if (spec.trans_a) {
    if (auto s = Transpose(transpose, a, &at); !s.ok()) return s;
  }
  if (spec.trans_b) {
    if (auto s = Transpose(transpose, b, &bt); !s.ok()) return s;
  }
  if (auto s = MatMul(spec.kind, at, bt, &y); !s.ok()) return s;
  if (auto s = Binary({.kind = TensorOpKind::kMul}, y, Tensor::Float({}, {spec.alpha}), out);
      !s.ok()) {
    return s;
  }
  if (c == nullptr) return absl::OkStatus();
  if (auto s = Binary({.kind = TensorOpKind::kMul}, *c, Tensor::Float({}, {spec.beta}), &scaled);
      !s.ok()) {
    return s;
  }
  const Shape mn = out->shape();
  y = std::move(*out);
  if (auto s = Binary({.kind = TensorOpKind::kAdd}, y, scaled, out); !s.ok()) return s;
  if (out->shape() != mn) {
    return Bad(spec.kind, absl::StrCat("C ", ShapeString(c->shape()), " does not broadcast to ",
                                       ShapeString(mn)));
  }
  return absl::OkStatus();
}

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

absl::Status Cast(const TensorOpSpec& spec, const Tensor& x, Tensor* out) {
  if (x.dtype() == spec.to) {
    *out = x;
    return absl::OkStatus();
  }
  *out = Make(spec.to, x.shape());
  const int64_t n = x.num_elements();
  if (spec.to == DType::kFloat32) {
    for (int64_t i = 0; i < n; ++i) out->f32()[i] = static_cast<float>(x.i64()[i]);
  } else {
    constexpr double kLimit = 9.2e18;
    for (int64_t i = 0; i < n; ++i) {
      const double v = x.f32()[i];
      out->i64()[i] = std::isnan(v) ? 0 : static_cast<int64_t>(std::clamp(v, -kLimit, kLimit));
    }
  }
  return absl::OkStatus();
}

// Softmax / LogSoftmax over `axis`, or per row of the 2-D coercion (opset < 13).
absl::Status Softmax(const TensorOpSpec& spec, const Tensor& x, Tensor* out) {
  if (x.dtype() != DType::kFloat32 || x.rank() == 0) return Bad(spec.kind, "expects floats");
  auto axis = Axis(spec.kind, spec.axis, x.rank());
  if (!axis.ok()) return axis.status();
  int64_t outer = 1, n = 1, inner = 1;
  for (int i = 0; i < x.rank(); ++i) {
    if (i < *axis) outer *= x.dim(i);
    if (i == *axis) n = x.dim(i);
    if (i > *axis) inner *= x.dim(i);
  }
  if (spec.coerce_2d) n *= inner, inner = 1;
  *out = x;
  float* p = out->f32();
  const bool log = spec.kind == TensorOpKind::kLogSoftmax;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      float* base = p + o * n * inner + in;
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t k = 0; k < n; ++k) m = std::max(m, base[k * inner]);
      double sum = 0.0;
      for (int64_t k = 0; k < n; ++k) sum += std::exp(base[k * inner] - m);
      for (int64_t k = 0; k < n; ++k) {
        const float z = base[k * inner] - m;
        base[k * inner] =
            log ? z - static_cast<float>(std::log(sum)) : static_cast<float>(std::exp(z) / sum);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Reduce(const TensorOpSpec& spec, const Tensor& x, Tensor* out) {
  if (x.dtype() != DType::kFloat32) return Bad(spec.kind, "expects floats");
  std::vector<bool> red(x.rank(), spec.ints.empty());
  for (int64_t a : spec.ints) {
    auto axis = Axis(spec.kind, a, x.rank());
    if (!axis.ok()) return axis.status();
    red[*axis] = true;
  }
  Shape kept, os;
  int64_t count = 1;
  for (int i = 0; i < x.rank(); ++i) {
    kept.push_back(red[i] ? 1 : x.dim(i));
    if (red[i]) count *= x.dim(i);
    if (!red[i] || spec.keep_dims) os.push_back(red[i] ? 1 : x.dim(i));
  }
  const bool max = spec.kind == TensorOpKind::kReduceMax;
  if (max && count == 0) return Bad(spec.kind, "reducing an empty axis");
  std::vector<double> acc(NumElements(kept), max ? -INFINITY : 0.0);
  const auto ks = BroadcastStrides(kept, x.shape());
  const auto xs = Strides(x.shape());
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    int64_t o = 0, rem = i;
    for (int a = 0; a < x.rank(); ++a) {
      o += (rem / xs[a]) * ks[a];
      rem %= xs[a];
    }
    const double v = x.f32()[i];
    acc[o] = max ? std::max(acc[o], v) : acc[o] + v;
  }
  *out = Tensor::Float(os);
  for (size_t i = 0; i < acc.size(); ++i) {
    const double v = spec.kind == TensorOpKind::kReduceMean && count > 0 ? acc[i] / count : acc[i];
    out->f32()[i] = static_cast<float>(v);
  }
  return absl::OkStatus();
}

absl::Status Range(const TensorOpSpec& spec, absl::Span<const Tensor* const> in, Tensor* out) {
  for (const Tensor* t : in) {
    if (t->num_elements() != 1 || t->dtype() != in[0]->dtype()) {
      return Bad(spec.kind, "start, limit and delta must be scalars of one type");
    }
  }
  return ByType(in[0]->dtype(), [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    const double start = Data<T>(*in[0])[0], limit = Data<T>(*in[1])[0], delta = Data<T>(*in[2])[0];
    if (delta == 0) return Bad(spec.kind, "delta 0");
    const double count = std::max(std::ceil((limit - start) / delta), 0.0);
    if (!(count <= kMaxTensorOpElements)) return Bad(spec.kind, "too many elements");
    const int64_t n = static_cast<int64_t>(count);
    *out = Make(in[0]->dtype(), {n});
    for (int64_t i = 0; i < n; ++i) Data<T>(*out)[i] = static_cast<T>(start + i * delta);
    return absl::OkStatus();
  });
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

}  // namespace

int TensorOpOutputs(const TensorOpSpec& spec) {
  if (spec.kind != TensorOpKind::kSplit) return 1;
  return spec.ints.empty() ? spec.num_outputs : static_cast<int>(spec.ints.size());
}

absl::Status EvalTensorOp(const TensorOpSpec& spec, absl::Span<const Tensor* const> in,
                          std::vector<Tensor>* outputs) {
  static constexpr int kMinOperands[] = {1, 1, 2, 1, 1, 1, 3, 1, 2, 2, 1, 1, 2, 2, 2, 2, 2, 2, 2,
                                         2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 2};
  static_assert(std::size(kMinOperands) == static_cast<size_t>(TensorOpKind::kAttachLengths) + 1);
  const int need = kMinOperands[static_cast<int>(spec.kind)];
  const bool variadic = spec.kind == TensorOpKind::kConcat;
  if (static_cast<int>(in.size()) < need) {
    return Bad(spec.kind, absl::StrCat("expects ", need, " operands, got ", in.size()));
  }
  for (int i = 0; i < need || (variadic && i < static_cast<int>(in.size())); ++i) {
    if (in[i] == nullptr) return Bad(spec.kind, absl::StrCat("operand ", i, " is missing"));
  }
  outputs->clear();
  outputs->emplace_back();
  Tensor* out = &outputs->back();
  const Tensor& x = *in[0];
  switch (spec.kind) {
    case TensorOpKind::kConstant:
    case TensorOpKind::kAttachLengths:
      *out = x;
      return absl::OkStatus();
    case TensorOpKind::kShape: {
      *out = Tensor::Int64({x.rank()}, std::vector<int64_t>(x.shape()));
      return absl::OkStatus();
    }
    case TensorOpKind::kGather:
      return Gather(spec, x, *in[1], out);
    case TensorOpKind::kConcat:
      return Concat(spec, in, out);
    case TensorOpKind::kUnsqueeze:
    case TensorOpKind::kSqueeze: {
      std::vector<int64_t> axes = spec.ints;
      if (in.size() > 1 && in[1] != nullptr) {
        auto v = Ints(spec.kind, in[1], "axes");
        if (!v.ok()) return v.status();
        axes = *v;
      }
      return spec.kind == TensorOpKind::kSqueeze ? Squeeze(spec, x, axes, out)
                                                 : Unsqueeze(spec, x, axes, out);
    }
    case TensorOpKind::kSlice:
      return Slice(spec, in, out);
    case TensorOpKind::kTranspose:
      return Transpose(spec, x, out);
    case TensorOpKind::kReshape: {
      auto target = Ints(spec.kind, in[1], "shape");
      if (!target.ok()) return target.status();
      auto os = ReshapeTarget(spec, x, *target);
      if (!os.ok()) return os.status();
      *out = x;
      out->Reshape(*os);
      return absl::OkStatus();
    }
    case TensorOpKind::kFlatten: {
      auto axis = Axis(spec.kind, spec.axis, x.rank() + 1);
      if (!axis.ok()) return axis.status();
      int64_t outer = 1;
      for (int i = 0; i < *axis; ++i) outer *= x.dim(i);
      *out = x;
      out->Reshape({outer, outer == 0 ? 0 : x.num_elements() / outer});
      return absl::OkStatus();
    }
    case TensorOpKind::kExpand: {
      auto target = Ints(spec.kind, in[1], "shape");
      if (!target.ok()) return target.status();
      return Expand(spec, x, *target, out);
    }
    case TensorOpKind::kCast:
      return Cast(spec, x, out);
    case TensorOpKind::kConstantOfShape: {
      auto shape = Ints(spec.kind, &x, "shape");
      if (!shape.ok()) return shape.status();
      if (auto c = CheckedCount(spec.kind, *shape); !c.ok()) return c.status();
      // A default-constructed value holds no data: fill with float 0.
      const bool has_value = !spec.value.floats().empty() || !spec.value.ints().empty();
      const DType dtype = has_value ? spec.value.dtype() : DType::kFloat32;
      *out = Make(dtype, *shape);
      if (has_value) {
        ByType(dtype, [&](auto tag) {
          using T = decltype(tag);
          std::fill_n(Data<T>(*out), out->num_elements(), Data<T>(spec.value)[0]);
          return 0;
        });
      }
      return absl::OkStatus();
    }
    case TensorOpKind::kAdd:
    case TensorOpKind::kSub:
    case TensorOpKind::kMul:
    case TensorOpKind::kDiv:
    case TensorOpKind::kMin:
    case TensorOpKind::kMax:
      return Binary(spec, x, *in[1], out);
    case TensorOpKind::kPow: {
      Tensor e;
      if (auto s = Cast({.kind = TensorOpKind::kCast, .to = x.dtype()}, *in[1], &e); !s.ok()) {
        return s;
      }
      return Binary(spec, x, e, out);
    }
    case TensorOpKind::kMatMul:
      return MatMul(spec.kind, x, *in[1], out);
    case TensorOpKind::kGemm:
      return Gemm(spec, x, *in[1], in.size() > 2 ? in[2] : nullptr, out);
    case TensorOpKind::kActivation:
    case TensorOpKind::kNeg:
    case TensorOpKind::kAbs:
    case TensorOpKind::kSqrt:
    case TensorOpKind::kExp:
    case TensorOpKind::kLog:
    case TensorOpKind::kReciprocal:
      return Unary(spec, x, out);
    case TensorOpKind::kSoftmax:
    case TensorOpKind::kLogSoftmax:
      return Softmax(spec, x, out);
    case TensorOpKind::kSplit:
      outputs->clear();
      return Split(spec, x, outputs);
    case TensorOpKind::kReduceMean:
    case TensorOpKind::kReduceSum:
    case TensorOpKind::kReduceMax:
      return Reduce(spec, x, out);
    case TensorOpKind::kRange:
      return Range(spec, in, out);
  }
  return Bad(spec.kind, "unknown op");
}

absl::Status RunTensorOp(const TensorOpSpec& spec, const Layer& layer, std::vector<Value>* values) {
  std::vector<const Tensor*> operands;
  size_t next = 0;
  for (const TensorOperand& op : spec.operands) {
    switch (op.source) {
      case TensorOperand::Source::kInput:
        if (next >= layer.inputs.size()) {
          return absl::InvalidArgumentError(
              absl::StrCat("layer '", layer.name, "' has fewer inputs than operands"));
        }
        operands.push_back(&(*values)[layer.inputs[next++]].tensor);
        break;
      case TensorOperand::Source::kConstant:
        operands.push_back(&op.constant);
        break;
      case TensorOperand::Source::kAbsent:
        operands.push_back(nullptr);
        break;
    }
  }
  std::vector<Tensor> results;
  if (auto s = EvalTensorOp(spec, operands, &results); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", layer.name, "': ", s.message()));
  }
  std::vector<int32_t> lengths;
  if (spec.kind == TensorOpKind::kAttachLengths) {
    const Tensor& x = *operands[0];
    const Tensor& lens = *operands[1];
    if (x.rank() < 2 || lens.dtype() != DType::kInt64 || lens.rank() != 1 ||
        lens.dim(0) != x.dim(0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer '", layer.name, "': sequence lengths ", ShapeString(lens.shape()),
                       " do not match a batch of ", x.rank() >= 1 ? x.dim(0) : 0));
    }
    for (int64_t len : lens.ints()) {
      if (len < 0 || len > x.dim(1)) {
        return absl::InvalidArgumentError(absl::StrCat("layer '", layer.name, "': sequence length ",
                                                       len, " outside [0, ", x.dim(1), "]"));
      }
      lengths.push_back(static_cast<int32_t>(len));
    }
  }
  if (results.size() < layer.outputs.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", layer.name, "' declares ", layer.outputs.size(), " outputs; ",
                     TensorOpName(spec.kind), " makes ", results.size()));
  }
  for (size_t i = 0; i < layer.outputs.size(); ++i) {
    Value& v = (*values)[layer.outputs[i]];
    v.tensor = std::move(results[i]);
    v.lengths = i == 0 ? lengths : std::vector<int32_t>{};
  }
  return absl::OkStatus();
}

}  // namespace cpu
}  // namespace rnnserve::engine
