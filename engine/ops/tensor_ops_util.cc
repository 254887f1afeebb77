#include "engine/ops/tensor_op_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rnnserve::engine::tensor_ops {

Tensor Make(DType dtype, Shape shape) {
  return dtype == DType::kFloat32 ? Tensor::Float(std::move(shape))
                                  : Tensor::Int64(std::move(shape));
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

}  // namespace rnnserve::engine::tensor_ops
