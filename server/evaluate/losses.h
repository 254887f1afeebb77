#pragma once

// Keras's losses and metrics, per element, as Keras's TF backend (tf-keras, Keras 3) computes
// them in model.evaluate. y_pred is [N, C] (N = batch, or batch x time for sequence outputs);
// y_true is [N, C], or [N] class ids for the sparse forms. Each function returns one value
// per row.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace rnnserve::server::evaluate {

constexpr double kEpsilon = 1e-7;  // Keras's backend.epsilon()

enum class LossKind {
  kMse,
  kMae,
  kMape,
  kMsle,
  kHuber,
  kLogCosh,
  kBinaryCrossentropy,
  kCategoricalCrossentropy,
  kSparseCategoricalCrossentropy,
};

struct LossSpec {
  LossKind kind = LossKind::kMse;
  std::string name;  // canonical, as models::CanonicalLossName gives it
  bool from_logits = false;
  double huber_delta = 1.0;
  // Binary cross-entropy from probabilities: Keras 3 takes log(q), Keras 2 log(q + 1e-7).
  int keras_major = 2;
  bool sparse() const { return kind == LossKind::kSparseCategoricalCrossentropy; }
  bool cross_entropy() const {
    return kind == LossKind::kBinaryCrossentropy || kind == LossKind::kCategoricalCrossentropy ||
           kind == LossKind::kSparseCategoricalCrossentropy;
  }
};

absl::StatusOr<LossSpec> MakeLoss(const std::string& canonical_name, bool from_logits,
                                  double huber_delta);

enum class MetricKind {
  kBinaryAccuracy,
  kCategoricalAccuracy,
  kSparseCategoricalAccuracy,
  kTopKCategoricalAccuracy,
  kSparseTopKCategoricalAccuracy,
  kMae,
  kMse,
  kRmse,  // sqrt of the weighted mean of squared errors over every element
  kMape,
  kMsle,
};

struct MetricSpec {
  std::string name;  // the key in the response
  MetricKind kind = MetricKind::kMae;
  bool weighted = false;
  int k = 5;
};

// Resolves a metric by its name or function. "accuracy"/"acc" follows Keras: binary when the
// prediction's last axis is 1, sparse categorical when the targets have a lower rank or a last
// axis of 1 against a wider prediction, categorical otherwise.
absl::StatusOr<MetricSpec> ResolveMetric(const std::string& name, const std::string& fn,
                                         bool weighted, int64_t y_true_rank,
                                         int64_t y_true_last_dim, int64_t y_pred_rank,
                                         int64_t y_pred_last_dim);

// Row-wise values; `labels` are used by the sparse kinds, `y_true` by the others.
void LossRows(const LossSpec& loss, const float* y_pred, const float* y_true, int64_t rows,
              int64_t cols, std::vector<double>* out);
void MetricRows(const MetricSpec& metric, const float* y_pred, const float* y_true, int64_t rows,
                int64_t cols, std::vector<double>* out);

}  // namespace rnnserve::server::evaluate
