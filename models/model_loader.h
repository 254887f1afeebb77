#pragma once

// Model files -> engine IR. The one entry point the server uses; nothing outside models/
// knows a file format.

#include <string>

#include "absl/status/statusor.h"
#include "engine/ir.h"

namespace rnnserve::models {

struct LoadOptions {
  // "keras_h5", "keras", "onnx" or "tf_savedmodel" ("tensorflow_savedmodel", Triton's name);
  // empty: chosen from the extension, or a directory holding saved_model.pb.
  std::string format;
  // For weights-only Keras files (save_weights): the architecture JSON (model.to_json()).
  std::string architecture_json_path;
};

// Loads `path` into a validated Model. Errors name the file and the problem; nothing is
// returned half-loaded.
absl::StatusOr<engine::Model> LoadModelFile(const std::string& path,
                                            const LoadOptions& options = {});

// The formats LoadModelFile accepts, by extension (".h5", ".hdf5", ".keras", ".onnx"), and a
// SavedModel: a directory holding saved_model.pb, or that file's path.
bool IsModelFile(const std::string& path);

}  // namespace rnnserve::models
