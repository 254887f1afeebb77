#pragma once

// Keras masks as both engines carry them beside a sequence [B, T, ...]: per-sequence lengths
// (size B; steps at or past lengths[b] are masked) and, only when some step inside a length is
// masked, a [B, T] step mask (1 = valid) that agrees with them.

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace rnnserve::engine::plan {

// One value's mask, read in place (either vector may be empty: no mask of that kind).
struct MaskRef {
  const std::vector<int32_t>* lengths;
  const std::vector<uint8_t>* step_mask;
};

// Lengths (and the step mask, when some step inside a length is masked) from per-step
// validity `valid` [B, T].
void MaskFromSteps(const std::vector<uint8_t>& valid, int64_t B, int64_t T,
                   std::vector<int32_t>* lengths, std::vector<uint8_t>* step_mask);

// The Keras mask of a merge: the AND of the inputs' masks (an input without one counts as all
// valid), which for lengths is the shortest per sequence. The outputs are cleared first.
void MergeMasks(absl::Span<const MaskRef> in, std::vector<int32_t>* lengths,
                std::vector<uint8_t>* step_mask);

}  // namespace rnnserve::engine::plan
