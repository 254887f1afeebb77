#include "engine/tensor.h"

#include <cassert>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rnnserve::engine {

std::string DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "FP32";
    case DType::kInt64:
      return "INT64";
  }
  return "?";
}

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeString(const Shape& shape) {
  // A shape from a client may have any rank: past 16 axes only the count is shown.
  constexpr size_t kMaxShown = 16;
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i == kMaxShown) {
      absl::StrAppend(&out, ",... (", shape.size(), " axes)");
      break;
    }
    if (i > 0) out.push_back(',');
    if (shape[i] < 0) {
      out.push_back('?');
    } else {
      absl::StrAppend(&out, shape[i]);
    }
  }
  out.push_back(']');
  return out;
}

Tensor Tensor::Float(Shape shape) {
  Tensor t;
  t.dtype_ = DType::kFloat32;
  t.f32_.assign(NumElements(shape), 0.0f);
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::Float(Shape shape, std::vector<float> values) {
  assert(NumElements(shape) == static_cast<int64_t>(values.size()));
  Tensor t;
  t.dtype_ = DType::kFloat32;
  t.shape_ = std::move(shape);
  t.f32_ = std::move(values);
  return t;
}

Tensor Tensor::Int64(Shape shape) {
  Tensor t;
  t.dtype_ = DType::kInt64;
  t.i64_.assign(NumElements(shape), 0);
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::Int64(Shape shape, std::vector<int64_t> values) {
  assert(NumElements(shape) == static_cast<int64_t>(values.size()));
  Tensor t;
  t.dtype_ = DType::kInt64;
  t.shape_ = std::move(shape);
  t.i64_ = std::move(values);
  return t;
}

void Tensor::Reshape(Shape shape) {
  assert(NumElements(shape) == num_elements());
  shape_ = std::move(shape);
}

}  // namespace rnnserve::engine
