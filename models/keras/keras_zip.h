#pragma once

// Keras 3 native files.
//
// `.keras` is a zip archive holding config.json (the model config), metadata.json
// (keras_version) and model.weights.h5, whose variables sit at layers/<key>/vars/<i>, with
// sub-layers below the layer: cell/ (recurrent layers), forward_layer/ and backward_layer/
// (Bidirectional), layer/ (TimeDistributed). A layer's arrays are its own vars in index order,
// then each sub-layer's, forward before backward.
//
// The key is not the layer's name: Keras 3 names each layer by its class in snake_case,
// numbered in the order of model.layers (lstm, lstm_1, simple_rnn...; Sequential models leave
// their InputLayer out of the count, functional models do not).
//
// The archive is checked before anything is inflated: at most kMaxEntries entries, no entry
// name that is absolute, contains "..", a backslash or a NUL (path traversal), declared sizes
// within limits and compression ratios that a real model cannot reach (zip bombs). Every error
// names the file and the problem.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/ir.h"
#include "models/keras/hdf5_file.h"
#include "models/keras/keras_config.h"
#include "models/keras/keras_json.h"
#include "models/model_loader.h"

namespace rnnserve::models::keras {

struct ZipLimits {
  int64_t max_entries = 1000;
  int64_t max_json_bytes = int64_t{64} << 20;    // config.json, metadata.json
  int64_t max_weights_bytes = int64_t{8} << 30;  // model.weights.h5
  int64_t max_ratio = 1000;                      // uncompressed / compressed, per entry
  int64_t ratio_floor_bytes = int64_t{1} << 20;  // ratios are checked above this size
};

absl::StatusOr<engine::Model> LoadKerasZip(const std::string& path, const LoadOptions& options);

// The same, from the archive's bytes (fuzzing, tests); `name` is used in messages.
absl::StatusOr<engine::Model> LoadKerasZipBytes(const std::string& bytes, const std::string& name,
                                                const ZipLimits& limits = {});

// The archive's config.json (the model config; `compile_config` holds compile()'s arguments),
// with the same checks as loading.
absl::StatusOr<Json> ReadKerasZipConfig(const std::string& path);

// Weights laid out as Keras 3 writes them (model.weights.h5, or a `.weights.h5` from
// save_weights): layers/<name>/... as described above.
// `model_config` gives the layer order that decides the keys.
absl::StatusOr<WeightSource> Keras3Weights(const Hdf5File& file, const Json& model_config);

}  // namespace rnnserve::models::keras
