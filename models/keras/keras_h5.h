#pragma once

// Keras HDF5 files: Keras 2.0-2.15 and tf.keras `model.save('x.h5')`, R keras, and Keras 3's
// legacy .h5. Also weights-only files (`save_weights`) with an architecture JSON.

#include <string>

#include "absl/status/statusor.h"
#include "engine/ir.h"
#include "models/model_loader.h"

namespace rnnserve::models::keras {

absl::StatusOr<engine::Model> LoadKerasH5(const std::string& path, const LoadOptions& options);

// The same, from the file's bytes (fuzzing, tests); `name` is used in messages.
absl::StatusOr<engine::Model> LoadKerasH5Bytes(const std::string& bytes, const std::string& name,
                                               const LoadOptions& options = {});

}  // namespace rnnserve::models::keras
