#pragma once

// One Keras layer (class name, config, weight arrays in the file's order) -> one IR LayerSpec.
// Used by the graph builder in keras_config.cc for .h5 and .keras files alike.
//
// Every converter checks the weight shapes against the config and rejects non-finite weights.
// A class without a converter, or an option the IR cannot express (data_format channels_first,
// Conv1D groups, LayerNormalization rms_scaling...), fails here, at load, naming the layer and
// its class.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/ir.h"
#include "models/keras/hdf5_file.h"
#include "models/keras/keras_json.h"

namespace rnnserve::models::keras {

struct LayerContext {
  std::string file;     // for messages
  int keras_major = 2;  // decides hard_sigmoid's formula (2: 0.2x+0.5, 3: x/6+0.5)
  int keras_minor = 0;  // before 2.3, a missing recurrent_activation meant hard_sigmoid
};

// "<file>: layer '<name>' (<cls>): <what>", INVALID_ARGUMENT.
absl::Status LayerError(const LayerContext& ctx, const std::string& name, const std::string& cls,
                        const std::string& what);

// A Keras activation (string, or Keras 3's serialised object) in the file's Keras version.
absl::StatusOr<engine::Activation> ParseActivation(const LayerContext& ctx, const std::string& name,
                                                   const std::string& cls, const Json& value);

// Converts a non-recurrent layer. `input_rank` is the rank (batch axis included) of the first
// input, or -1 where unknown; it resolves positive axes into the IR's negative ones.
absl::StatusOr<engine::LayerSpec> ConvertLayer(const LayerContext& ctx, const std::string& name,
                                               const std::string& cls, const Json& config,
                                               std::vector<Array> arrays, int input_rank);

}  // namespace rnnserve::models::keras
