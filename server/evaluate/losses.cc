#include "server/evaluate/losses.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace rnnserve::server::evaluate {
namespace {

// Keras clips probabilities in float32: to [1e-7f, 1 - 1e-7f] = [1e-7, 0.99999988]. Near 0 and
// 1, where a saturated output sits, the float32 bounds are what sets the loss.
constexpr float kEpsilonF = static_cast<float>(kEpsilon);
float Clip(float p) { return std::clamp(p, kEpsilonF, 1.0f - kEpsilonF); }

double Softplus(double x) { return x > 30 ? x : std::log1p(std::exp(x)); }

// log(softmax(z))[j] for one row.
double LogSoftmax(const float* z, int64_t cols, int64_t j) {
  double m = z[0];
  for (int64_t c = 1; c < cols; ++c) m = std::max<double>(m, z[c]);
  double sum = 0;
  for (int64_t c = 0; c < cols; ++c) sum += std::exp(z[c] - m);
  return z[j] - m - std::log(sum);
}

int64_t ArgMax(const float* v, int64_t cols) {
  return std::max_element(v, v + cols) - v;  // first maximum, as tf.argmax
}

double RowLoss(const LossSpec& loss, const float* p, const float* t, int64_t cols) {
  double acc = 0;
  switch (loss.kind) {
    case LossKind::kMse:
      for (int64_t c = 0; c < cols; ++c) acc += (double(p[c]) - t[c]) * (double(p[c]) - t[c]);
      return acc / cols;
    case LossKind::kMae:
      for (int64_t c = 0; c < cols; ++c) acc += std::fabs(double(p[c]) - t[c]);
      return acc / cols;
    case LossKind::kMape:
      for (int64_t c = 0; c < cols; ++c) {
        acc += std::fabs((double(t[c]) - p[c]) / std::max<double>(std::fabs(t[c]), kEpsilon));
      }
      return 100.0 * acc / cols;
    case LossKind::kMsle:
      for (int64_t c = 0; c < cols; ++c) {
        const double d = std::log(std::max<double>(p[c], kEpsilon) + 1.0) -
                         std::log(std::max<double>(t[c], kEpsilon) + 1.0);
        acc += d * d;
      }
      return acc / cols;
    case LossKind::kHuber:
      for (int64_t c = 0; c < cols; ++c) {
        const double e = std::fabs(double(p[c]) - t[c]);
        acc += e <= loss.huber_delta
                   ? 0.5 * e * e
                   : loss.huber_delta * e - 0.5 * loss.huber_delta * loss.huber_delta;
      }
      return acc / cols;
    case LossKind::kLogCosh:
      for (int64_t c = 0; c < cols; ++c) {
        const double x = double(p[c]) - t[c];
        acc += x + Softplus(-2.0 * x) - std::log(2.0);
      }
      return acc / cols;
    case LossKind::kBinaryCrossentropy:
      for (int64_t c = 0; c < cols; ++c) {
        if (loss.from_logits) {
          // sigmoid_cross_entropy_with_logits, in its stable form.
          const double z = p[c];
          acc += std::max(z, 0.0) - z * t[c] + std::log1p(std::exp(-std::fabs(z)));
        } else if (loss.keras_major >= 3) {
          // Keras 3: log(q) and log(1 - q) of the clipped q, in float32.
          const float q = Clip(p[c]);
          acc -= t[c] * std::log(q) + (1.0 - t[c]) * std::log(1.0f - q);
        } else {
          // Keras 2: log(q + epsilon) and log(1 - q + epsilon), in float32.
          const float q = Clip(p[c]);
          acc -= t[c] * std::log(q + kEpsilonF) + (1.0 - t[c]) * std::log(1.0f - q + kEpsilonF);
        }
      }
      return acc / cols;
    case LossKind::kCategoricalCrossentropy: {
      if (loss.from_logits) {
        for (int64_t c = 0; c < cols; ++c) acc -= t[c] * LogSoftmax(p, cols, c);
        return acc;
      }
      float sum = 0;
      for (int64_t c = 0; c < cols; ++c) sum += p[c];
      for (int64_t c = 0; c < cols; ++c) acc -= t[c] * std::log(Clip(p[c] / sum));
      return acc;
    }
    case LossKind::kSparseCategoricalCrossentropy: {
      const int64_t label = static_cast<int64_t>(t[0]);
      if (loss.from_logits) return -LogSoftmax(p, cols, label);
      // Keras takes log of the clipped probabilities as logits: -log(q_label / sum(q)).
      double sum = 0;
      for (int64_t c = 0; c < cols; ++c) sum += Clip(p[c]);
      return -(std::log(double(Clip(p[label]))) - std::log(sum));
    }
  }
  return 0;
}

double RowMetric(const MetricSpec& m, const float* p, const float* t, int64_t cols) {
  double acc = 0;
  switch (m.kind) {
    case MetricKind::kBinaryAccuracy:
      for (int64_t c = 0; c < cols; ++c) acc += (double(t[c]) == (p[c] > 0.5f ? 1.0 : 0.0));
      return acc / cols;
    case MetricKind::kCategoricalAccuracy:
      return ArgMax(t, cols) == ArgMax(p, cols) ? 1.0 : 0.0;
    case MetricKind::kSparseCategoricalAccuracy:
      return static_cast<int64_t>(t[0]) == ArgMax(p, cols) ? 1.0 : 0.0;
    case MetricKind::kTopKCategoricalAccuracy:
    case MetricKind::kSparseTopKCategoricalAccuracy: {
      const int64_t target = m.kind == MetricKind::kTopKCategoricalAccuracy
                                 ? ArgMax(t, cols)
                                 : static_cast<int64_t>(t[0]);
      int64_t greater = 0;  // tf.math.in_top_k: ties at the boundary count as in
      for (int64_t c = 0; c < cols; ++c) greater += p[c] > p[target];
      return greater < m.k ? 1.0 : 0.0;
    }
    case MetricKind::kMae: {
      LossSpec l{LossKind::kMae};
      return RowLoss(l, p, t, cols);
    }
    case MetricKind::kMse:
    case MetricKind::kRmse: {
      LossSpec l{LossKind::kMse};
      return RowLoss(l, p, t, cols);
    }
    case MetricKind::kMape: {
      LossSpec l{LossKind::kMape};
      return RowLoss(l, p, t, cols);
    }
    case MetricKind::kMsle: {
      LossSpec l{LossKind::kMsle};
      return RowLoss(l, p, t, cols);
    }
  }
  return 0;
}

bool IsSparseMetric(MetricKind k) {
  return k == MetricKind::kSparseCategoricalAccuracy ||
         k == MetricKind::kSparseTopKCategoricalAccuracy;
}

}  // namespace

absl::StatusOr<LossSpec> MakeLoss(const std::string& name, bool from_logits, double huber_delta) {
  LossSpec s;
  s.name = name;
  s.from_logits = from_logits;
  s.huber_delta = huber_delta;
  if (name == "mse")
    s.kind = LossKind::kMse;
  else if (name == "mae")
    s.kind = LossKind::kMae;
  else if (name == "mape")
    s.kind = LossKind::kMape;
  else if (name == "msle")
    s.kind = LossKind::kMsle;
  else if (name == "huber")
    s.kind = LossKind::kHuber;
  else if (name == "log_cosh")
    s.kind = LossKind::kLogCosh;
  else if (name == "binary_crossentropy")
    s.kind = LossKind::kBinaryCrossentropy;
  else if (name == "categorical_crossentropy")
    s.kind = LossKind::kCategoricalCrossentropy;
  else if (name == "sparse_categorical_crossentropy")
    s.kind = LossKind::kSparseCategoricalCrossentropy;
  else
    return absl::InvalidArgumentError(
        absl::StrCat("loss '", name,
                     "' is not supported (mse, mae, mape, msle, huber, log_cosh, "
                     "binary_crossentropy, categorical_crossentropy, "
                     "sparse_categorical_crossentropy)"));
  return s;
}

absl::StatusOr<MetricSpec> ResolveMetric(const std::string& name, const std::string& fn,
                                         bool weighted, int64_t y_true_rank,
                                         int64_t y_true_last_dim, int64_t y_pred_rank,
                                         int64_t y_pred_last_dim) {
  MetricSpec m;
  m.name = name;
  m.weighted = weighted;
  std::string f = fn.empty() ? name : fn;
  if (f == "accuracy" || f == "acc") {
    const bool binary = y_pred_last_dim == 1;
    const bool sparse = y_true_rank < y_pred_rank || (y_true_last_dim == 1 && y_pred_last_dim > 1);
    f = binary   ? "binary_accuracy"
        : sparse ? "sparse_categorical_accuracy"
                 : "categorical_accuracy";
  }
  if (f == "binary_accuracy" || f == "BinaryAccuracy")
    m.kind = MetricKind::kBinaryAccuracy;
  else if (f == "categorical_accuracy" || f == "CategoricalAccuracy")
    m.kind = MetricKind::kCategoricalAccuracy;
  else if (f == "sparse_categorical_accuracy" || f == "SparseCategoricalAccuracy")
    m.kind = MetricKind::kSparseCategoricalAccuracy;
  else if (f == "top_k_categorical_accuracy" || f == "TopKCategoricalAccuracy")
    m.kind = MetricKind::kTopKCategoricalAccuracy;
  else if (f == "sparse_top_k_categorical_accuracy" || f == "SparseTopKCategoricalAccuracy")
    m.kind = MetricKind::kSparseTopKCategoricalAccuracy;
  else if (f == "mae" || f == "mean_absolute_error" || f == "MeanAbsoluteError")
    m.kind = MetricKind::kMae;
  else if (f == "mse" || f == "mean_squared_error" || f == "MeanSquaredError")
    m.kind = MetricKind::kMse;
  else if (f == "rmse" || f == "root_mean_squared_error" || f == "RootMeanSquaredError")
    m.kind = MetricKind::kRmse;
  else if (f == "mape" || f == "mean_absolute_percentage_error" ||
           f == "MeanAbsolutePercentageError")
    m.kind = MetricKind::kMape;
  else if (f == "msle" || f == "mean_squared_logarithmic_error" ||
           f == "MeanSquaredLogarithmicError")
    m.kind = MetricKind::kMsle;
  else
    return absl::InvalidArgumentError(
        absl::StrCat("metric '", name,
                     "' is not supported (accuracy, binary_accuracy, categorical_accuracy, "
                     "sparse_categorical_accuracy, top_k_categorical_accuracy, mae, mse, "
                     "rmse, mape, msle)"));
  return m;
}

void LossRows(const LossSpec& loss, const float* y_pred, const float* y_true, int64_t rows,
              int64_t cols, std::vector<double>* out) {
  out->resize(rows);
  const int64_t tcols = loss.sparse() ? 1 : cols;
  for (int64_t r = 0; r < rows; ++r) {
    (*out)[r] = RowLoss(loss, y_pred + r * cols, y_true + r * tcols, cols);
  }
}

void MetricRows(const MetricSpec& metric, const float* y_pred, const float* y_true, int64_t rows,
                int64_t cols, std::vector<double>* out) {
  out->resize(rows);
  const int64_t tcols = IsSparseMetric(metric.kind) ? 1 : cols;
  for (int64_t r = 0; r < rows; ++r) {
    (*out)[r] = RowMetric(metric, y_pred + r * cols, y_true + r * tcols, cols);
  }
}

}  // namespace rnnserve::server::evaluate
