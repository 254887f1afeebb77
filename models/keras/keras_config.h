#pragma once

// Keras model_config JSON + per-layer weights -> engine IR. Shared by the .h5 and .keras
// readers, which differ only in where the JSON and the arrays live.
//
// Keras gate order, converted here to the canonical order of engine/ir.h:
//   LSTM (and CuDNNLSTM) kernels [I, 4H] with columns i, f, c, o  -> i, f, g, o (same blocks)
//   GRU  (and CuDNNGRU)  kernels [I, 3H] with columns z, r, h     -> r, z, n (blocks swapped)
//   biases: LSTM [4H]; CuDNNLSTM [8H] = input 4H then recurrent 4H; GRU [3H] (input only,
//   reset_after=False) or [2, 3H] (input row, recurrent row); CuDNNGRU [6H].

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
                                         const KerasSource& source,
                                         const WeightSource& weights);

}  // namespace rnnserve::models::keras
