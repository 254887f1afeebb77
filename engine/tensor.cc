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

Tensor::Tensor(const Tensor& other) : dtype_(other.dtype_), shape_(other.shape_) {
  if (!other.wrapped_) {
    f32_ = other.f32_;
    i64_ = other.i64_;
  } else if (dtype_ == DType::kFloat32) {
    f32_.assign(other.f32(), other.f32() + other.num_elements());
  } else {
    i64_.assign(other.i64(), other.i64() + other.num_elements());
  }
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this != &other) *this = Tensor(other);
  return *this;
}

Tensor::Tensor(Tensor&& other) noexcept
    : dtype_(other.dtype_),
      shape_(std::move(other.shape_)),
      f32_(std::move(other.f32_)),
      i64_(std::move(other.i64_)),
      wrapped_(std::exchange(other.wrapped_, nullptr)),
      owner_(std::move(other.owner_)) {
  other.shape_.clear();
}

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this != &other) {
    dtype_ = other.dtype_;
    shape_ = std::move(other.shape_);
    f32_ = std::move(other.f32_);
    i64_ = std::move(other.i64_);
    wrapped_ = std::exchange(other.wrapped_, nullptr);
    owner_ = std::move(other.owner_);
    other.shape_.clear();
  }
  return *this;
}

Tensor Tensor::Wrap(DType dtype, Shape shape, void* data, std::shared_ptr<void> owner) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.wrapped_ = data;
  t.owner_ = std::move(owner);
  return t;
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
