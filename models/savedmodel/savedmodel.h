#pragma once

// TensorFlow SavedModels, as TF Serving lays them out: <model>/<version>/saved_model.pb with
// variables/variables.index and variables/variables.data-* beside it.
//
// Keras-made SavedModels (tf_keras 2.x `model.save(dir)`, which writes keras_metadata.pb): the
// architecture is the model config JSON in keras_metadata.pb's root node (the same JSON an .h5
// file holds, read by keras_config.h's BuildModel), and the weights come from the variables
// checkpoint (tensor_bundle.h). A layer's weights are found through the checkpoint's object
// graph (the _CHECKPOINTABLE_OBJECT_GRAPH entry): keras_metadata.pb gives the layer's node path
// (root.layer_with_weights-0), the path leads to the layer's object, and its `variables` list
// (or, in models saved with save_traces=False, its variable children, depth first) gives the
// arrays in the layer's weight order. Checkpoint keys themselves are not trusted to name the
// layer: TensorFlow keys a variable by the first path it found (variables/3/...).
//
// The model's inputs and outputs are named after the serving signature (serving_default)'s
// input and output keys, which are what TF Serving clients send and read.
//
// SavedModels without keras_metadata.pb (Keras 3 `model.export`, `tf.saved_model.save`) hold
// only a TensorFlow graph: the serving signature's function is walked back from its outputs and
// its Keras layers recognised (savedmodel_graph.cc, graph_layers.h: LSTM, GRU, SimpleRNN,
// Bidirectional in every merge mode, Masking, Embedding, Dense, BatchNormalization,
// Concatenate, Add, Multiply, Average, CudnnRNNV3 as a GPU-traced Keras 3 export writes it;
// Dropout leaves nothing to recognise), several inputs and outputs included, the weights read
// through the captured variables. An op on the way that is not part of a recognised layer fails
// the load naming the op and asking for the .keras or .h5 file.

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "engine/ir.h"
#include "models/model_loader.h"

namespace rnnserve::models::savedmodel {

// True for a directory holding saved_model.pb (or the path of a saved_model.pb).
bool IsSavedModelPath(const std::string& path);

// `path` is the version directory (or its saved_model.pb).
absl::StatusOr<engine::Model> LoadSavedModel(const std::string& path);

// As LoadSavedModel, with saved_model.pb's bytes given (fuzzing): `dir` supplies
// keras_metadata.pb and variables/.
absl::StatusOr<engine::Model> LoadSavedModelBytes(const std::string& dir,
                                                  const std::string& saved_model_pb);

// The training_config JSON (compile()'s loss and metrics) of a Keras SavedModel's
// keras_metadata.pb root, as an .h5 holds it; nullopt when there is none (no Keras metadata,
// or saved uncompiled or with include_optimizer=False).
absl::StatusOr<std::optional<std::string>> ReadKerasTrainingConfig(const std::string& path);

}  // namespace rnnserve::models::savedmodel
