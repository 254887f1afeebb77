#include "engine/cpu/layers.h"

#include <Eigen/Core>
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/cpu/gate_kernels.h"
#include "engine/ops/activation.h"
#include "engine/plan/masks.h"

namespace rnnserve::engine::cpu {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// In the active kernel set's vectors (gate_kernels.h), in chunks that fit its int counts.
void ApplyActivation(const Activation& a, Tensor* t) {
  const GateKernels& gk = ActiveGateKernels();
  if (a.kind == ActivationKind::kSoftmax) {
    const int64_t cols = t->shape().back();
    gk.softmax_rows(t->f32(), t->num_elements() / cols, cols);
    return;
  }
  constexpr int64_t kChunk = int64_t{1} << 30;
  for (int64_t i = 0; i < t->num_elements(); i += kChunk) {
    gk.activate(a, t->f32() + i, static_cast<int>(std::min(kChunk, t->num_elements() - i)));
  }
}

}  // namespace

void SetMaskFromSteps(const std::vector<uint8_t>& valid, int64_t B, int64_t T, Value* out) {
  plan::MaskFromSteps(valid, B, T, &out->lengths, &out->step_mask);
}

absl::Status RunDense(const DenseSpec& spec, const std::string& name, const Value& in, Value* out) {
  const Tensor& x = in.tensor;
  if (x.dtype() != DType::kFloat32 || x.rank() < 2 || x.shape().back() != spec.in) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer '", name, "': input ", ShapeString(x.shape()), " expected last axis ", spec.in));
  }
  const int64_t rows = x.num_elements() / spec.in;
  Shape shape = x.shape();
  shape.back() = spec.out;
  out->tensor = Tensor::Float(shape);
  Eigen::Map<const RowMat> X(x.f32(), rows, spec.in);                 // [rows, in]
  Eigen::Map<const RowMat> K(spec.kernel.data(), spec.in, spec.out);  // [in, out]
  Eigen::Map<RowMat> Y(out->tensor.f32(), rows, spec.out);            // [rows, out]
  Y.noalias() = X * K;
  if (!spec.bias.empty()) {
    Y.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(spec.bias.data(), spec.out);
  }
  ApplyActivation(spec.activation, &out->tensor);
  KeepMask(in, out);
  return absl::OkStatus();
}

absl::Status RunMasking(const MaskingSpec& spec, const Value& in, Value* out) {
  const Tensor& x = in.tensor;
  if (x.rank() != 3 || x.dtype() != DType::kFloat32) {
    return absl::InvalidArgumentError(
        absl::StrCat("Masking expects [B,T,F] floats, got ", ShapeString(x.shape())));
  }
  const int64_t B = x.dim(0), T = x.dim(1), F = x.dim(2);
  out->tensor = x;
  std::vector<uint8_t> valid(B * T, 0);  // [B, T]
  float* y = out->tensor.f32();
  for (int64_t b = 0; b < B; ++b) {
    // Request lengths, when given, bound the data-derived mask.
    const int64_t limit = in.lengths.empty() ? T : in.lengths[b];
    for (int64_t t = 0; t < T; ++t) {
      float* step = y + (b * T + t) * F;
      bool masked = t >= limit;
      if (!masked) {
        masked = true;
        for (int64_t f = 0; f < F && masked; ++f) masked = step[f] == spec.mask_value;
      }
      if (masked) {
        std::fill_n(step, F, 0.0f);  // Keras multiplies the input by the mask
      } else {
        valid[b * T + t] = 1;
      }
    }
  }
  SetMaskFromSteps(valid, B, T, out);
  return absl::OkStatus();
}

absl::Status RunEmbedding(const EmbeddingSpec& spec, const std::string& name, const Value& in,
                          Value* out) {
  const Tensor& ids = in.tensor;
  if (ids.dtype() != DType::kInt64 || ids.rank() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", name, "': expects int ids [B,T], got ", DTypeName(ids.dtype()), " ",
                     ShapeString(ids.shape())));
  }
  const int64_t B = ids.dim(0), T = ids.dim(1);
  out->tensor = Tensor::Float({B, T, spec.dim});
  float* y = out->tensor.f32();
  for (int64_t i = 0; i < B * T; ++i) {
    const int64_t id = ids.i64()[i];
    if (id < 0 || id >= spec.vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer '", name, "': token id ", id, " outside [0, ", spec.vocab, ")"));
    }
    std::copy_n(spec.table.data() + id * spec.dim, spec.dim, y + i * spec.dim);
  }
  KeepMask(in, out);
  if (spec.mask_zero) {
    std::vector<uint8_t> valid(B * T, 0);  // [B, T]
    for (int64_t b = 0; b < B; ++b) {
      const int64_t limit = in.lengths.empty() ? T : in.lengths[b];
      for (int64_t t = 0; t < limit; ++t) valid[b * T + t] = ids.i64()[b * T + t] != 0;
    }
    SetMaskFromSteps(valid, B, T, out);
  }
  return absl::OkStatus();
}

absl::Status RunActivation(const Activation& activation, const Value& in, Value* out) {
  if (in.tensor.dtype() != DType::kFloat32) {
    return absl::InvalidArgumentError("activation expects float input");
  }
  out->tensor = in.tensor;
  KeepMask(in, out);
  ApplyActivation(activation, &out->tensor);
  return absl::OkStatus();
}

}  // namespace rnnserve::engine::cpu
