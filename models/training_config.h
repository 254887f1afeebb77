#pragma once

// What a model file says about how it was compiled (loss, metrics): the training_config
// attribute of a Keras 2 .h5 (or the same JSON in a tf_keras SavedModel's keras_metadata.pb),
// or the compile_config in a Keras 3 .keras file's config.json
// (losses and metrics as strings, serialized objects {"module", "class_name", "config"}, or
// serialized functions). Read for Evaluate; the engine never sees it.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace rnnserve::models {

struct MetricConfig {
  std::string name;       // the key Keras reports it under, e.g. "accuracy", "rmse"
  std::string fn;         // the resolved function when the file records one, e.g.
                          // "sparse_categorical_accuracy", "root_mean_squared_error"; else empty
  bool weighted = false;  // from weighted_metrics: applies sample weights
};

struct TrainingConfig {
  std::string loss;  // canonical name: mse, mae, mape, msle, huber, log_cosh,
                     // binary_crossentropy, categorical_crossentropy,
                     // sparse_categorical_crossentropy (others: as the file names them)
  bool from_logits = false;
  float huber_delta = 1.0f;
  std::vector<MetricConfig> metrics;
};

// Canonical loss name for Keras's aliases and class names ("MSE", "MeanSquaredError",
// "mean_squared_error" -> "mse"); other names are returned unchanged.
std::string CanonicalLossName(const std::string& name);

// nullopt when the file has no training config (saved uncompiled or with include_optimizer
// off, or a format without one).
absl::StatusOr<std::optional<TrainingConfig>> ReadTrainingConfig(const std::string& path);

// Parses the training_config JSON text Keras writes.
absl::StatusOr<TrainingConfig> ParseTrainingConfig(const std::string& json_text,
                                                   const std::string& what);

}  // namespace rnnserve::models
