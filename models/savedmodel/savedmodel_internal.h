#pragma once

// Shared by savedmodel.cc (the file, the signature, the graph refusal) and
// savedmodel_keras.cc (the Keras metadata path).

#include <string>

#include "absl/status/statusor.h"
#include "engine/ir.h"
#include "models/savedmodel/savedmodel.pb.h"

namespace rnnserve::models::savedmodel {

// Reads a whole file of at most `max_bytes`; NOT_FOUND when absent.
absl::StatusOr<std::string> ReadFileBytes(const std::string& path, int64_t max_bytes);

// The root node's metadata JSON of keras_metadata.pb's bytes (`what` names it in messages).
absl::StatusOr<std::string> KerasRootMetadata(const std::string& metadata_bytes,
                                              const std::string& what);

// The Keras model in `dir` (keras_metadata.pb + variables/), named as in `signature`.
absl::StatusOr<engine::Model> LoadKerasSavedModel(const std::string& dir,
                                                  const std::string& metadata_bytes);

// A SavedModel without Keras metadata, from its serving signature's function graph
// (savedmodel_graph.cc).
absl::StatusOr<engine::Model> LoadGraphSavedModel(const std::string& dir, const MetaGraphDef& mg,
                                                  const SignatureDef& sig);

}  // namespace rnnserve::models::savedmodel
