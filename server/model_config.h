#pragma once

// config.pbtxt: parsed once at load, validated, then read-only.

#include <string>

#include "absl/status/statusor.h"
#include "rnnserve/v1/model_config.pb.h"

namespace rnnserve::server {

// Reads `<model_dir>/config.pbtxt` (protobuf text format). A missing file gives a default
// config named after the directory: everything else then comes from the model file.
absl::StatusOr<v1::ModelConfig> ReadModelConfig(const std::string& model_dir);

// Parses and validates config.pbtxt text; `where` names it in errors. The name is left as the
// text gives it (empty if it gives none).
absl::StatusOr<v1::ModelConfig> ParseModelConfig(const std::string& text, const std::string& where);

// Checks values that the schema alone cannot: non-negative sizes, known platforms, names.
absl::Status ValidateModelConfig(const v1::ModelConfig& config, const std::string& where);

}  // namespace rnnserve::server
