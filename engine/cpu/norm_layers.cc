#include "engine/cpu/norm_layers.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace rnnserve::engine::cpu {
namespace {

absl::Status CheckOptional(const std::string& name, const char* what, size_t got, size_t want) {
  if (got == 0 || got == want) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("layer '", name, "': ", what, " has ", got, " values, expected ", want));
}

}  // namespace

absl::Status ValidateBatchNorm(const BatchNormSpec& spec, const std::string& name) {
  const size_t c = spec.mean.size();
  if (c == 0 || spec.variance.size() != c) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", name, "': moving mean has ", c, " values and moving variance ",
                     spec.variance.size(), "; expected the same positive count"));
  }
  if (auto s = CheckOptional(name, "gamma", spec.gamma.size(), c); !s.ok()) return s;
  return CheckOptional(name, "beta", spec.beta.size(), c);
}

absl::Status ValidateLayerNorm(const LayerNormSpec& spec, const std::string& name) {
  if (!spec.gamma.empty() && !spec.beta.empty() && spec.gamma.size() != spec.beta.size()) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", name, "': gamma has ",
                                                   spec.gamma.size(), " values, beta ",
                                                   spec.beta.size(), "; expected equal counts"));
  }
  return absl::OkStatus();
}

absl::Status CheckBatchNormInput(const BatchNormSpec& spec, const std::string& name, DType dtype,
                                 const Shape& x) {
  const size_t c = spec.mean.size();
  if (dtype != DType::kFloat32 || x.empty() || static_cast<size_t>(x.back()) != c) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", name, "': input ", DTypeName(dtype),
                                                   " ", ShapeString(x),
                                                   " expected FP32 with last axis ", c));
  }
  return absl::OkStatus();
}

absl::Status CheckLayerNormInput(const LayerNormSpec& spec, const std::string& name, DType dtype,
                                 const Shape& x) {
  const size_t params = std::max(spec.gamma.size(), spec.beta.size());
  if (dtype != DType::kFloat32 || x.empty() ||
      (params > 0 && static_cast<size_t>(x.back()) != params)) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", name, "': input ", ShapeString(x),
                                                   " expected FP32 with last axis ", params));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> SoftmaxAxis(const SoftmaxSpec& spec, const std::string& name, DType dtype,
                                const Shape& x) {
  const int rank = static_cast<int>(x.size());
  const int axis = spec.axis < 0 ? spec.axis + rank : spec.axis;
  if (dtype != DType::kFloat32 || axis < 0 || axis >= rank) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", name, "': softmax axis ", spec.axis,
                                                   " does not fit FP32 input ", ShapeString(x)));
  }
  return axis;
}

void FoldBatchNorm(const BatchNormSpec& spec, std::vector<float>* scale,
                   std::vector<float>* shift) {
  const size_t c = spec.mean.size();
  scale->resize(c);
  shift->resize(c);
  for (size_t j = 0; j < c; ++j) {
    const float inv = 1.0f / std::sqrt(spec.variance[j] + spec.epsilon);
    (*scale)[j] = (spec.gamma.empty() ? 1.0f : spec.gamma[j]) * inv;
    (*shift)[j] = (spec.beta.empty() ? 0.0f : spec.beta[j]) - spec.mean[j] * (*scale)[j];
  }
}

absl::Status RunSoftmax(const SoftmaxSpec& spec, const std::string& name, const Value& in,
                        Value* out) {
  const Tensor& x = in.tensor;
  auto checked = SoftmaxAxis(spec, name, x.dtype(), x.shape());
  if (!checked.ok()) return checked.status();
  const int rank = x.rank(), axis = *checked;
  // View x as [outer, n, inner] with the softmax over n.
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= x.dim(i);
  for (int i = axis + 1; i < rank; ++i) inner *= x.dim(i);
  const int64_t n = x.dim(axis);
  out->tensor = x;
  KeepMask(in, out);
  float* y = out->tensor.f32();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      float* base = y + o * n * inner + i;
      float m = -INFINITY;
      for (int64_t k = 0; k < n; ++k) m = std::max(m, base[k * inner]);
      float sum = 0.0f;
      for (int64_t k = 0; k < n; ++k) {
        base[k * inner] = std::exp(base[k * inner] - m);
        sum += base[k * inner];
      }
      const float inv = 1.0f / sum;
      for (int64_t k = 0; k < n; ++k) base[k * inner] *= inv;
    }
  }
  return absl::OkStatus();
}

absl::Status RunBatchNorm(const BatchNormSpec& spec, const std::string& name, const Value& in,
                          Value* out) {
  const size_t c = spec.mean.size();
  if (auto s = CheckBatchNormInput(spec, name, in.tensor.dtype(), in.tensor.shape()); !s.ok()) {
    return s;
  }
  std::vector<float> scale, shift;  // [C] each
  FoldBatchNorm(spec, &scale, &shift);
  out->tensor = in.tensor;
  KeepMask(in, out);
  float* y = out->tensor.f32();
  const int64_t rows = out->tensor.num_elements() / static_cast<int64_t>(c);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = y + r * c;
    for (size_t j = 0; j < c; ++j) row[j] = row[j] * scale[j] + shift[j];
  }
  return absl::OkStatus();
}

absl::Status RunLayerNorm(const LayerNormSpec& spec, const std::string& name, const Value& in,
                          Value* out) {
  const Tensor& x = in.tensor;
  if (auto s = CheckLayerNormInput(spec, name, x.dtype(), x.shape()); !s.ok()) return s;
  const int64_t c = x.shape().back();
  out->tensor = x;
  KeepMask(in, out);
  float* y = out->tensor.f32();
  const int64_t rows = c == 0 ? 0 : x.num_elements() / c;
  for (int64_t r = 0; r < rows; ++r) {
    float* row = y + r * c;
    // Two passes in double keep the variance exact for rows with a large mean.
    double mean = 0.0;
    for (int64_t j = 0; j < c; ++j) mean += row[j];
    mean /= static_cast<double>(c);
    double var = 0.0;
    for (int64_t j = 0; j < c; ++j) var += (row[j] - mean) * (row[j] - mean);
    var /= static_cast<double>(c);
    const double inv = 1.0 / std::sqrt(var + spec.epsilon);
    for (int64_t j = 0; j < c; ++j) {
      const double g = spec.gamma.empty() ? 1.0 : spec.gamma[j];
      const double b = spec.beta.empty() ? 0.0 : spec.beta[j];
      row[j] = static_cast<float>((row[j] - mean) * inv * g + b);
    }
  }
  return absl::OkStatus();
}

}  // namespace rnnserve::engine::cpu
