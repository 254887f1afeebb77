#include "engine/cpu/conv_pool.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/ops/activation.h"
#include "engine/plan/layer_plans.h"

namespace rnnserve::engine::cpu {
namespace {

using plan::CheckSequence;
using plan::Conv1DWindow;
using plan::PlanWindow;
using plan::Window;

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

}  // namespace

absl::Status RunConv1D(const Conv1DSpec& spec, const std::string& name, const Value& in,
                       Value* out) {
  const Tensor& x = in.tensor;
  if (auto s = CheckSequence(name, x, spec.in_channels); !s.ok()) return s;
  const int64_t B = x.dim(0), T = x.dim(1), Ci = spec.in_channels, Co = spec.out_channels;
  const int64_t K = spec.kernel_size, D = spec.dilation, S = spec.stride;
  const Window w = Conv1DWindow(spec, T);
  out->tensor = Tensor::Float({B, w.out_len, Co});
  out->lengths.clear();
  out->step_mask.clear();
  if (w.out_len == 0) return absl::OkStatus();
  // im2col: [B*T', K*Cin] windows (zeros where the window hangs over the padding).
  std::vector<float> cols(B * w.out_len * K * Ci, 0.0f);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t p = 0; p < w.out_len; ++p) {
      float* row = cols.data() + (b * w.out_len + p) * K * Ci;
      for (int64_t k = 0; k < K; ++k) {
        const int64_t t = p * S + k * D - w.pad_left;
        if (t < 0 || t >= T) continue;
        std::copy_n(x.f32() + (b * T + t) * Ci, Ci, row + k * Ci);
      }
    }
  }
  // [B*T', K*Cin] . [K*Cin, Cout] -> [B*T', Cout]
  MatMulRows(cols.data(), spec.kernel.data(), out->tensor.f32(), B * w.out_len, K * Ci, Co);
  Eigen::Map<RowMat> Y(out->tensor.f32(), B * w.out_len, Co);  // [B*T', Cout]
  if (!spec.bias.empty()) Y.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(spec.bias.data(), Co);
  if (spec.activation.kind == ActivationKind::kSoftmax) {
    SoftmaxRows(out->tensor.f32(), B * w.out_len, Co);
  } else {
    ActivateInPlace(spec.activation, out->tensor.f32(), static_cast<int>(B * w.out_len * Co));
  }
  return absl::OkStatus();
}

absl::Status RunPool1D(const Pool1DSpec& spec, const std::string& name, const Value& in,
                       Value* out) {
  const Tensor& x = in.tensor;
  if (auto s = CheckSequence(name, x, 0); !s.ok()) return s;
  const int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2);
  const Window w = PlanWindow(T, spec.pool_size, spec.stride, spec.same_padding, false);
  out->tensor = Tensor::Float({B, w.out_len, C});
  out->lengths.clear();
  out->step_mask.clear();
  const bool max = spec.kind == Pool1DSpec::Kind::kMax;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t p = 0; p < w.out_len; ++p) {
      // The window's steps inside [0, T); padding takes no part (TensorFlow's SAME pooling).
      const int64_t t0 = std::max<int64_t>(p * spec.stride - w.pad_left, 0);
      const int64_t t1 = std::min<int64_t>(p * spec.stride - w.pad_left + spec.pool_size, T);
      float* y = out->tensor.f32() + (b * w.out_len + p) * C;
      for (int64_t c = 0; c < C; ++c) {
        float acc = max ? -std::numeric_limits<float>::infinity() : 0.0f;
        for (int64_t t = t0; t < t1; ++t) {
          const float v = x.f32()[(b * T + t) * C + c];
          acc = max ? std::max(acc, v) : acc + v;
        }
        y[c] = max ? acc : acc / static_cast<float>(t1 - t0);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status RunGlobalPool1D(const GlobalPool1DSpec& spec, const std::string& name, const Value& in,
                             Value* out) {
  const Tensor& x = in.tensor;
  if (auto s = CheckSequence(name, x, 0); !s.ok()) return s;
  const int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2);
  out->tensor = Tensor::Float({B, C});
  out->lengths.clear();
  out->step_mask.clear();
  const bool max = spec.kind == GlobalPool1DSpec::Kind::kMax;
  for (int64_t b = 0; b < B; ++b) {
    float* y = out->tensor.f32() + b * C;
    // Average: only the valid steps count (Keras divides by the mask's sum).
    const int64_t len = (max || in.lengths.empty()) ? T : in.lengths[b];
    const uint8_t* valid = (max || in.step_mask.empty()) ? nullptr : in.step_mask.data() + b * T;
    std::fill_n(y, C, max ? -std::numeric_limits<float>::infinity() : 0.0f);
    int64_t count = 0;
    for (int64_t t = 0; t < len; ++t) {
      if (valid && !valid[t]) continue;
      ++count;
      const float* row = x.f32() + (b * T + t) * C;
      for (int64_t c = 0; c < C; ++c) y[c] = max ? std::max(y[c], row[c]) : y[c] + row[c];
    }
    if (!max) {
      // A fully masked sequence divides 0 by 0 in Keras too; keep its NaN out: zeros.
      const float inv = count > 0 ? 1.0f / static_cast<float>(count) : 0.0f;
      for (int64_t c = 0; c < C; ++c) y[c] *= inv;
    }
  }
  return absl::OkStatus();
}

}  // namespace rnnserve::engine::cpu
