#pragma once

// Keras model_config JSON + per-layer weights -> engine IR. Shared by the .h5 and .keras
// readers, which differ only in where the JSON and the arrays live.
//
// Sequential configs (a dict, or the bare layer list of Keras <= 2.2.2) and functional configs
// (Keras 2 `[name, node, tensor, kwargs]` references or Keras 3 `keras_history` tensors) become a
// layer list in topological order. Per-layer conversion is in keras_layers.h; recurrent layers,
// with Keras's gate order and its conversion, in keras_recurrent.h. hard_sigmoid's formula and
// the pre-2.3 defaults follow KerasSource::keras_version.

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "engine/ir.h"
#include "models/keras/hdf5_file.h"

namespace rnnserve::models::keras {

// Returns a layer's weight arrays in the layer's own order (the file's weight_names order).
using WeightSource = std::function<absl::StatusOr<std::vector<Array>>(const std::string& layer)>;

struct KerasSource {
  std::string file;           // for messages
  std::string format;         // "keras_h5" or "keras"
  std::string keras_version;  // e.g. "2.2.2", "3.8.0"; decides hard_sigmoid's formula
};

// `model_config` is {"class_name": "Sequential" | "Model" | "Functional", "config": ...}.
absl::StatusOr<engine::Model> BuildModel(const nlohmann::json& model_config,
                                         const KerasSource& source, const WeightSource& weights);

}  // namespace rnnserve::models::keras
