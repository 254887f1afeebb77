#include "engine/ops/lengths_ops.h"

#include <algorithm>

#include "engine/plan/tensor_op_plans.h"

namespace rnnserve::engine {
namespace {

// The element offset of (o, first, m, second, i) in [outer, n0, mid, n1, inner], where first
// and second index the batch and time axes in the order they come.
struct View {
  const plan::LengthsOpPlan& p;
  int64_t n0() const { return p.time_first ? p.T : p.B; }
  int64_t n1() const { return p.time_first ? p.B : p.T; }
};

// Copies each sequence's step max(length - 1, 0) of x into y (x with a time axis of size 1).
template <typename T>
void GatherRows(const plan::LengthsOpPlan& p, const T* x, T* y) {
  const View v{p};
  // The output is x with the time axis of size 1.
  const int64_t out_n0 = p.time_first ? 1 : p.B, out_n1 = p.time_first ? p.B : 1;
  for (int64_t o = 0; o < p.outer; ++o) {
    for (int64_t b = 0; b < p.B; ++b) {
      const int64_t t = std::max<int32_t>(p.lengths[b] - 1, 0);
      const int64_t i0 = p.time_first ? t : b, i1 = p.time_first ? b : t;
      const int64_t j0 = p.time_first ? 0 : b, j1 = p.time_first ? b : 0;
      for (int64_t m = 0; m < p.mid; ++m) {
        const T* src = x + (((o * v.n0() + i0) * p.mid + m) * v.n1() + i1) * p.inner;
        T* dst = y + (((o * out_n0 + j0) * p.mid + m) * out_n1 + j1) * p.inner;
        std::copy_n(src, p.inner, dst);
      }
    }
  }
}

template <typename T>
void ZeroPast(const plan::LengthsOpPlan& p, T* y) {
  const View v{p};
  for (int64_t o = 0; o < p.outer; ++o) {
    for (int64_t i0 = 0; i0 < v.n0(); ++i0) {
      for (int64_t m = 0; m < p.mid; ++m) {
        for (int64_t i1 = 0; i1 < v.n1(); ++i1) {
          const int64_t b = p.time_first ? i1 : i0, t = p.time_first ? i0 : i1;
          if (t < p.lengths[b]) continue;
          std::fill_n(y + (((o * v.n0() + i0) * p.mid + m) * v.n1() + i1) * p.inner, p.inner, T{});
        }
      }
    }
  }
}

}  // namespace

absl::Status EvalLengthsOp(const TensorOpSpec& spec, const Tensor& x,
                           absl::Span<const int32_t> lengths, Tensor* out) {
  if (spec.kind == TensorOpKind::kAttachRequestLengths) {
    *out = x;
    return absl::OkStatus();
  }
  auto p = plan::PlanLengthsOp(spec, x.shape(), lengths);
  if (!p.ok()) return p.status();
  if (x.dtype() != DType::kFloat32 && x.dtype() != DType::kInt64) {
    return plan::Bad(spec.kind, "expects FP32 or INT64 data");
  }
  const bool f32 = x.dtype() == DType::kFloat32;
  if (spec.kind == TensorOpKind::kZeroPastLengths) {
    *out = x;  // a copy has its own data: x may be read by other layers
    if (f32) {
      ZeroPast(*p, out->f32());
    } else {
      ZeroPast(*p, out->i64());
    }
    return absl::OkStatus();
  }
  *out = f32 ? Tensor::Float(p->out) : Tensor::Int64(p->out);
  if (f32) {
    GatherRows(*p, x.f32(), out->f32());
  } else {
    GatherRows(*p, x.i64(), out->i64());
  }
  return absl::OkStatus();
}

}  // namespace rnnserve::engine
