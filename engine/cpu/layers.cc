#include "engine/cpu/layers.h"

#include <Eigen/Core>
#include <algorithm>
#ifdef _OPENMP
#include <omp.h>
#endif

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

void MatMulRows(const float* x, const float* w, float* y, int64_t rows, int64_t k, int64_t n) {
  Eigen::Map<const RowMat> W(w, k, n);  // [k, n]
  auto block = [&](int64_t r0, int64_t r1) {
    Eigen::Map<const RowMat> X(x + r0 * k, r1 - r0, k);  // [r1 - r0, k]
    Eigen::Map<RowMat> Y(y + r0 * n, r1 - r0, n);        // [r1 - r0, n]
    Y.noalias() = X * W;
  };
  constexpr int64_t kRowsPerBlock = 64;
  constexpr int64_t kMinParallelMacs = int64_t{1} << 26;
#ifdef _OPENMP
  const int threads = omp_get_max_threads();
  if (threads > 1 && rows >= 2 * kRowsPerBlock && rows * k * n >= kMinParallelMacs) {
    const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    // Inside the region Eigen sees more than one thread running and stays on its own.
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int64_t i = 0; i < blocks; ++i) {
      block(i * kRowsPerBlock, std::min(rows, (i + 1) * kRowsPerBlock));
    }
    return;
  }
  // Eigen takes its thread count from omp_get_max_threads(): one, for this product.
  omp_set_num_threads(1);
  block(0, rows);
  omp_set_num_threads(threads);
#else
  block(0, rows);
#endif
}

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
  // [rows, in] . [in, out] -> [rows, out]
  MatMulRows(x.f32(), spec.kernel.data(), out->tensor.f32(), rows, spec.in, spec.out);
  Eigen::Map<RowMat> Y(out->tensor.f32(), rows, spec.out);  // [rows, out]
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
