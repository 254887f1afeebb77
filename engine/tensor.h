#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"

namespace rnnserve::engine {

enum class DType { kFloat32, kInt64 };

std::string DTypeName(DType dtype);

using Shape = std::vector<int64_t>;

int64_t NumElements(const Shape& shape);
std::string ShapeString(const Shape& shape);

// A dense, row-major tensor that owns its data. Token ids travel as int64; everything else
// is float32. Only the buffer matching dtype() is non-empty.
class Tensor {
 public:
  Tensor() = default;
  static Tensor Float(Shape shape);
  static Tensor Float(Shape shape, std::vector<float> values);
  static Tensor Int64(Shape shape);
  static Tensor Int64(Shape shape, std::vector<int64_t> values);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i]; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t num_elements() const { return NumElements(shape_); }

  float* f32() { return f32_.data(); }
  const float* f32() const { return f32_.data(); }
  int64_t* i64() { return i64_.data(); }
  const int64_t* i64() const { return i64_.data(); }
  absl::Span<const float> floats() const { return f32_; }
  absl::Span<const int64_t> ints() const { return i64_; }

  // Changes the shape without touching the data; the element count must not change.
  void Reshape(Shape shape);

 private:
  DType dtype_ = DType::kFloat32;
  Shape shape_;
  std::vector<float> f32_;
  std::vector<int64_t> i64_;
};

}  // namespace rnnserve::engine
