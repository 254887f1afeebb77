#include "engine/cpu/norm_layers.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/plan/layer_plans.h"

namespace rnnserve::engine::cpu {
namespace {

using plan::CheckBatchNormInput;
using plan::CheckLayerNormInput;
using plan::FoldBatchNorm;
using plan::SoftmaxAxis;

}  // namespace
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
