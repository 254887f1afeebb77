#pragma once

// Which logits Keras's cross-entropy losses read for a model output.
//
// Keras's TF backend (tf-keras backend._get_logits; keras/src/backend/tensorflow/nn.py
// _get_logits, the same in Keras 2 and 3) computes categorical, sparse categorical and binary
// cross-entropy from the *input* of the softmax or sigmoid that produced the output tensor (its
// `_keras_logits`), whichever of the three losses it is, and whatever `from_logits` says; from
// the probabilities, clipped to [1e-7, 1 - 1e-7], only when the output did not come straight
// from such an activation. On a saturated output the two differ by far (a probability of 0 in
// float32 costs at most -log(1e-7) = 16.1 from the probabilities, the true value from the
// logits).
//
// Straight from the activation means, in the IR of a Keras file (models/keras):
//   - a Dense or Conv1D layer whose activation is softmax or sigmoid (not TimeDistributed(Dense):
//     TimeDistributed reshapes the inner layer's output, a new tensor without logits);
//   - an Activation layer of softmax or sigmoid, or a Softmax layer (any axis);
//   - in Keras 3 only, through Dropout-like layers (IdentitySpec): Keras 3's return their input
//     at inference, Keras 2's a tf.identity of it.
// Other files (ONNX) have no such rule: their losses take the probabilities.

#include <optional>

#include "engine/ir.h"

namespace rnnserve::server::evaluate {

// The major version of the Keras that wrote the model (engine::Model::producer "keras 3.4.1"),
// or 0 when the model is not a Keras file.
int KerasMajor(const engine::Model& model);

// Where the logits of output `output` are, when Keras's losses would read them.
struct OutputLogits {
  int layer = -1;  // index in Model::layers of the softmax or sigmoid
  // The logits are the layer's input (Activation, Softmax), or the output of its linear part,
  // before its fused activation (Dense, Conv1D): the layer must be split to expose them.
  bool split = false;
};
std::optional<OutputLogits> FindOutputLogits(const engine::Model& model, int output);

// The model with one more output, last: the logits that FindOutputLogits found for `output`
// (same shape as that output), named "<output's name>:logits". A fused activation becomes a
// layer of its own after the linear part; nothing else changes.
engine::Model WithLogitsOutput(const engine::Model& model, int output, const OutputLogits& logits);

}  // namespace rnnserve::server::evaluate
