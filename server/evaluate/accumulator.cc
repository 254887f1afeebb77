#include "server/evaluate/accumulator.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace rnnserve::server::evaluate {

absl::Status Accumulator::Add(const engine::Tensor& y_pred, const engine::Tensor* logits,
                              const engine::Shape& y_true_shape, const std::vector<float>& y_true,
                              const std::vector<float>& weights, const std::string& target) {
  const engine::Shape& ps = y_pred.shape();
  if (ps.empty() || ps[0] == 0) return absl::InvalidArgumentError("empty prediction");
  const int64_t B = ps[0];
  const int64_t C = ps.size() > 1 ? ps.back() : 1;
  const int64_t rows = y_pred.num_elements() / C;
  bool needs_sparse = loss_.sparse();
  for (const MetricSpec& m : metrics_) {
    needs_sparse |= m.kind == MetricKind::kSparseCategoricalAccuracy ||
                    m.kind == MetricKind::kSparseTopKCategoricalAccuracy;
  }
  // Sparse targets: the prediction's shape without its class axis (or with a last axis of 1).
  engine::Shape sparse_shape(ps.begin(), ps.end() - 1);
  engine::Shape sparse_shape_1 = sparse_shape;
  sparse_shape_1.push_back(1);
  const bool is_sparse_shape = y_true_shape == sparse_shape || y_true_shape == sparse_shape_1;
  if (needs_sparse ? !is_sparse_shape : y_true_shape != ps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "targets '", target, "': shape ", engine::ShapeString(y_true_shape), " given, expected ",
        needs_sparse ? absl::StrCat(engine::ShapeString(sparse_shape), " class ids")
                     : engine::ShapeString(ps)));
  }
  if (needs_sparse) {
    for (float id : y_true) {
      if (id < 0 || id >= C || id != std::floor(id)) {
        return absl::InvalidArgumentError(
            absl::StrCat("targets '", target, "': class id ", id, " outside [0, ", C, ")"));
      }
    }
  }
  if (!weights.empty() && static_cast<int64_t>(weights.size()) != B) {
    return absl::InvalidArgumentError(
        absl::StrCat("sample_weight: ", weights.size(), " values for a batch of ", B));
  }
  const int64_t per_sample = rows / B;
  auto weight = [&](int64_t row) {
    return weights.empty() ? 1.0 : double(weights[row / per_sample]);
  };

  std::vector<double> values;
  if (logits != nullptr && loss_.cross_entropy()) {
    if (logits->shape() != ps) {
      return absl::InternalError(
          absl::StrCat("logits of shape ", engine::ShapeString(logits->shape()),
                       " for a prediction of shape ", engine::ShapeString(ps)));
    }
    LossSpec from_logits = loss_;
    from_logits.from_logits = true;
    LossRows(from_logits, logits->f32(), y_true.data(), rows, C, &values);
  } else {
    LossRows(loss_, y_pred.f32(), y_true.data(), rows, C, &values);
  }
  for (int64_t r = 0; r < rows; ++r) loss_sum_ += weight(r) * values[r];
  loss_count_ += static_cast<double>(rows);
  for (size_t i = 0; i < metrics_.size(); ++i) {
    MetricRows(metrics_[i], y_pred.f32(), y_true.data(), rows, C, &values);
    for (int64_t r = 0; r < rows; ++r) {
      const double w = metrics_[i].weighted ? weight(r) : 1.0;
      totals_[i].sum += w * values[r];
      totals_[i].count += w;
    }
  }
  samples_ += B;
  return absl::OkStatus();
}

std::map<std::string, double> Accumulator::metrics() const {
  std::map<std::string, double> out;
  for (size_t i = 0; i < metrics_.size(); ++i) {
    double v = totals_[i].count > 0 ? totals_[i].sum / totals_[i].count : 0.0;
    if (metrics_[i].kind == MetricKind::kRmse) v = std::sqrt(v);
    out[metrics_[i].name] = v;
  }
  return out;
}

}  // namespace rnnserve::server::evaluate
