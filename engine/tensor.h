#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/types/span.h"

namespace rnnserve::engine {

enum class DType { kFloat32, kInt64 };

std::string DTypeName(DType dtype);

using Shape = std::vector<int64_t>;

int64_t NumElements(const Shape& shape);
std::string ShapeString(const Shape& shape);

// A dense, row-major tensor. Token ids travel as int64; everything else is float32. Its data
// is its own vector, or memory it shares with an owner (Wrap: the GPU engine's page-locked
// blocks, which DMA reads and writes directly). A copy always gets its own vector, so copies
// never alias; a move keeps the memory it had.
class Tensor {
 public:
  Tensor() = default;
  Tensor(const Tensor& other);
  Tensor& operator=(const Tensor& other);
  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(Tensor&& other) noexcept;
  ~Tensor() = default;

  static Tensor Float(Shape shape);
  static Tensor Float(Shape shape, std::vector<float> values);
  static Tensor Int64(Shape shape);
  static Tensor Int64(Shape shape, std::vector<int64_t> values);
  // A tensor over `data`, which holds NumElements(shape) values of `dtype` (uninitialised) and
  // stays valid while `owner` lives; the tensor and its moves hold `owner`.
  static Tensor Wrap(DType dtype, Shape shape, void* data, std::shared_ptr<void> owner);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i]; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t num_elements() const { return NumElements(shape_); }

  float* f32() { return wrapped_ ? static_cast<float*>(wrapped_) : f32_.data(); }
  const float* f32() const { return wrapped_ ? static_cast<const float*>(wrapped_) : f32_.data(); }
  int64_t* i64() { return wrapped_ ? static_cast<int64_t*>(wrapped_) : i64_.data(); }
  const int64_t* i64() const {
    return wrapped_ ? static_cast<const int64_t*>(wrapped_) : i64_.data();
  }
  absl::Span<const float> floats() const {
    if (!wrapped_) return f32_;
    return {f32(), dtype_ == DType::kFloat32 ? static_cast<size_t>(num_elements()) : 0};
  }
  absl::Span<const int64_t> ints() const {
    if (!wrapped_) return i64_;
    return {i64(), dtype_ == DType::kInt64 ? static_cast<size_t>(num_elements()) : 0};
  }
  // True when the data is shared with an owner (Wrap), not the tensor's own vector.
  bool wrapped() const { return wrapped_ != nullptr; }

  // Changes the shape without touching the data; the element count must not change.
  void Reshape(Shape shape);

 private:
  DType dtype_ = DType::kFloat32;
  Shape shape_;
  std::vector<float> f32_;
  std::vector<int64_t> i64_;
  void* wrapped_ = nullptr;  // Wrap's memory; null when the data is f32_ or i64_
  std::shared_ptr<void> owner_;
};

}  // namespace rnnserve::engine
