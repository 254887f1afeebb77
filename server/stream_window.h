#pragma once

// Stream chunks of a model whose input fixes its time axis (an InputLayer [None, 20, 5], as
// models trained on windows have).
//
// A streamable model (Servable::streamable(): only recurrent and per-step layers sit on the
// time axis) computes each step from the steps before it, so cutting its window into chunks
// changes nothing: a chunk's length is free, and the stream's total is held to the window.
// Chunks of 7, 7 and 6 steps of a 20-step window give, on the last chunk, what Predict gives
// for the whole window; a chunk that takes the total past the window is INVALID_ARGUMENT
// naming the window and the input that fixes it, and leaves the sequence as it was.
// Models whose time axis is free have no window. StreamPredict and KServe sequence requests
// (sequence_id) both stream.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "server/core/request.h"
#include "server/servable.h"

namespace rnnserve::server {

struct StreamSignature {
  std::vector<TensorSignature> inputs;  // the model's, with every time axis free
  int64_t window = 0;                   // steps one stream may carry in total; 0: no limit
  std::string window_input;             // the input whose shape fixes the window
};

// For a streamable model; inputs with a time axis are [B, T, ...] floats and [B, T] token ids.
StreamSignature StreamSignatureOf(const Servable& servable);

// Holds a validated chunk of a sequence that has carried `steps_before` steps to the window;
// *chunk_steps is the chunk's steps (its length when the batch gives one, else its time axis).
absl::Status CheckStreamWindow(const Servable& servable, const engine::Batch& chunk,
                               int64_t steps_before, int64_t* chunk_steps);

// Validates one chunk (core::Validate against StreamSignatureOf(servable)); the window is
// checked once the sequence's position is known (core/sequence_runner.h).
absl::StatusOr<engine::Batch> ValidateStreamChunk(const core::Request& request,
                                                  const Servable& servable);

}  // namespace rnnserve::server
