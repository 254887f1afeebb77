#include "engine/ops/tensor_op_kernels.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/ops/activation.h"

namespace rnnserve::engine::tensor_ops {

namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

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

}  // namespace

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

namespace {

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

}  // namespace

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
  auto plan = PlanMatMul(kind, a.shape(), b.shape());
  if (!plan.ok()) return plan.status();
  const int64_t M = plan->M, K = plan->K, N = plan->N;
  *out = Tensor::Float(plan->out);
  const int64_t nb = NumElements(plan->batch);
  const auto sa = BroadcastStrides(plan->abatch, plan->batch),
             sb = BroadcastStrides(plan->bbatch, plan->batch);
  const auto ob = Strides(plan->batch);
  for (int64_t i = 0; i < nb; ++i) {
    int64_t oa = 0, obb = 0, rem = i;
    for (size_t ax = 0; ax < plan->batch.size(); ++ax) {
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

// alpha * A' B' + beta * C, with A' = A or its transpose (trans_a), likewise B'.
absl::Status Gemm(const TensorOpSpec& spec, const Tensor& a, const Tensor& b, const Tensor* c,
                  Tensor* out) {
  auto plan = PlanGemm(spec, a.shape(), b.shape(), c != nullptr ? &c->shape() : nullptr);
  if (!plan.ok()) return plan.status();
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
  y = std::move(*out);
  return Binary({.kind = TensorOpKind::kAdd}, y, scaled, out);
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
  auto plan = PlanReduce(spec, x.shape());
  if (!plan.ok()) return plan.status();
  Shape kept = x.shape();  // the output's elements, at the input's rank
  for (int i = 0; i < x.rank(); ++i) {
    if (plan->reduced[i]) kept[i] = 1;
  }
  const int64_t count = plan->count;
  const bool max = spec.kind == TensorOpKind::kReduceMax;
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
  *out = Tensor::Float(plan->out);
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

}  // namespace rnnserve::engine::tensor_ops
