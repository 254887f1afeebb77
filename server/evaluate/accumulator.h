#pragma once

// Loss and metrics over a dataset that arrives in batches, aggregated as Keras's
// model.evaluate aggregates them:
//   loss   = sum(w * l) / (number of loss elements)   (SUM_OVER_BATCH_SIZE, averaged over
//            batches weighted by batch size, which is the same thing)
//   metric = sum(w * v) / sum(w) for weighted metrics, mean(v) for the others; rmse takes the
//            square root at the end.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/tensor.h"
#include "server/evaluate/losses.h"

namespace rnnserve::server::evaluate {

class Accumulator {
 public:
  Accumulator(LossSpec loss, std::vector<MetricSpec> metrics)
      : loss_(std::move(loss)), metrics_(std::move(metrics)), totals_(metrics_.size()) {}

  // y_pred: [B, ..., C]; y_true: [B, ..., C], or class ids [B, ...] / [B, ..., 1] for the sparse
  // loss and metrics; weights: empty or B values. Errors name `target` and the expected shape.
  // logits: null, or [B, ..., C], the input of the softmax or sigmoid that produced y_pred
  // (keras_logits.h): a cross-entropy loss is then computed from them, as Keras does, whatever
  // the loss's from_logits says; the metrics always take y_pred.
  absl::Status Add(const engine::Tensor& y_pred, const engine::Tensor* logits,
                   const engine::Shape& y_true_shape, const std::vector<float>& y_true,
                   const std::vector<float>& weights, const std::string& target);

  double loss() const { return loss_count_ > 0 ? loss_sum_ / loss_count_ : 0.0; }
  std::map<std::string, double> metrics() const;
  int64_t samples() const { return samples_; }
  const LossSpec& loss_spec() const { return loss_; }

 private:
  struct Total {
    double sum = 0;
    double count = 0;
  };
  const LossSpec loss_;
  const std::vector<MetricSpec> metrics_;
  std::vector<Total> totals_;
  double loss_sum_ = 0;
  double loss_count_ = 0;
  int64_t samples_ = 0;
};

}  // namespace rnnserve::server::evaluate
