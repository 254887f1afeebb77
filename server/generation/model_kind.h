#pragma once

// Which language models can generate, found from the model itself (its signature, probed at
// load): one input of token ids and one output of next-token distributions.
//
//  - kStateful: a causal LM (Embedding -> recurrent layers with per-step outputs -> softmax):
//    ids [B, T] with a free time axis in, [B, T, V] out, and StreamPredict can run it (only
//    causal layers). It runs the prompt once and then one step per token, carrying its
//    recurrent states.
//  - kWindow: the last W ids [B, W] in, the next token's distribution [B, V] out (textgenrnn's
//    models). The window slides; a shorter context is left-padded with id 0 (pad_sequences).
//
// Anything else is refused with FAILED_PRECONDITION saying what the model has and what
// generation needs.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/tensor.h"

namespace rnnserve::server {
class Servable;
}

namespace rnnserve::server::generation {

struct ModelKind {
  enum Kind { kStateful, kWindow };
  Kind kind = kStateful;
  int64_t window = 0;      // kWindow: W
  int64_t vocab_size = 0;  // V: the output's last axis
  engine::DType input_dtype = engine::DType::kInt64;
  const char* name() const { return kind == kStateful ? "stateful causal LM" : "fixed window"; }
};

absl::StatusOr<ModelKind> DetectKind(const Servable& model);

}  // namespace rnnserve::server::generation
