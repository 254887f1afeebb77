#pragma once

// Real and computed timesteps of an engine batch, for BatchStats (padding waste).
//
// real:     the sum of the per-sequence lengths (Batch::lengths); without lengths, every
//           sequence counts the full padded length T.
// computed: B x T, the timesteps of the padded [B, T, ...] tensors the engine is handed: T is
//           axis 1 of the first sequence input, values [B, T, F...] or token ids [B, T]
//           (an Embedding's input); 1 when every input is [B, F].
// 1 - real / computed is the share of the batch that is padding; a batcher that groups
// sequences of like lengths drives it toward 0.

#include <cstdint>

#include "engine/engine.h"

namespace rnnserve::server::metrics {

struct Timesteps {
  int64_t batch_size = 0;
  int64_t real = 0;
  int64_t computed = 0;
};

Timesteps CountTimesteps(const engine::Batch& batch);

}  // namespace rnnserve::server::metrics
