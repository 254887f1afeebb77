#pragma once

// The lengths rule (engine/lengths.h) on a real model, for every engine: a sequence of length 0
// in a batch of the example Keras model (Masking -> LSTM -> LSTM -> Dense).

#include "engine/engine.h"
#include "gtest/gtest.h"

namespace rnnserve::testing {

// Runs the example fixture (tests/fixtures/example, 3 sequences) with lengths {40, 0, 12} on
// `compiled`: rows 0 and 2 must equal Keras's predictions (a zero-length neighbour changes
// nothing), and row 1 must equal the answer for an all-zero row without lengths, which the
// model's Masking layer masks at every step (what Keras computes for a fully masked sequence).
::testing::AssertionResult ZeroLengthRowActsAsAFullyMaskedOne(engine::CompiledModel* compiled);

}  // namespace rnnserve::testing
