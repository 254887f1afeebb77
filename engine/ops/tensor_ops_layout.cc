#include "engine/ops/tensor_op_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rnnserve::engine::tensor_ops {

absl::Status Transpose(const TensorOpSpec& spec, const Tensor& x, Tensor* out) {
  auto plan = PlanTranspose(spec, x.shape());
  if (!plan.ok()) return plan.status();
  *out = CopyStrided(x, *plan);
  return absl::OkStatus();
}

absl::Status Gather(const TensorOpSpec& spec, const Tensor& x, const Tensor& indices, Tensor* out) {
  auto plan = PlanGather(spec, x.shape(), indices);
  if (!plan.ok()) return plan.status();
  *out = Make(x.dtype(), plan->shape);
  const int64_t ni = static_cast<int64_t>(plan->indices.size()), inner = plan->inner;
  ByType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = Data<T>(x);
    T* dst = Data<T>(*out);
    for (int64_t o = 0; o < plan->outer; ++o) {
      for (int64_t j = 0; j < ni; ++j) {
        std::copy_n(src + (o * plan->n + plan->indices[j]) * inner, inner,
                    dst + (o * ni + j) * inner);
      }
    }
    return 0;
  });
  return absl::OkStatus();
}

absl::Status Concat(const TensorOpSpec& spec, absl::Span<const Tensor* const> xs, Tensor* out) {
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  for (const Tensor* x : xs) {
    shapes.push_back(x->shape());
    dtypes.push_back(x->dtype());
  }
  auto plan = PlanConcat(spec, shapes, dtypes);
  if (!plan.ok()) return plan.status();
  const Tensor& first = *xs[0];
  *out = Make(first.dtype(), plan->shape);
  const int64_t outer = plan->outer, row = plan->row;
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
  auto plan = PlanSlice(spec, in[0]->shape(), in);
  if (!plan.ok()) return plan.status();
  *out = CopyStrided(*in[0], *plan);
  return absl::OkStatus();
}

}  // namespace rnnserve::engine::tensor_ops
