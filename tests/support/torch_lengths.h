#pragma once

// The per-sequence lengths fixtures (tests/fixtures/torch_lengths, made by
// models/scripts/make_torch_lengths_fixtures.py): PyTorch exports without sequence_lens, a
// padded batch with lengths, and PyTorch's answers for each row run alone on its truncated
// sequence. Shared by the CPU conformance test and the GPU test.

#include <string>
#include <vector>

#include "engine/engine.h"
#include "gtest/gtest.h"

namespace rnnserve::testing {

// The case names (folders), sorted; those whose model must refuse lengths end in "Refused".
std::vector<std::string> TorchLengthsCases();

// Loads the case through the ONNX importer, compiles it with `engine`, runs the padded batch
// with its lengths and compares every output with PyTorch's (rtol, atol). For a *Refused case:
// the run must fail with INVALID_ARGUMENT naming the layer in refused.txt, and the batch
// without lengths must still run. `runs` times on the one compiled model (the GPU engine runs
// a shape eagerly, then captures it, then replays it).
::testing::AssertionResult TorchLengthsCaseMatches(const engine::Engine& engine,
                                                   const std::string& name, double rtol,
                                                   double atol, int runs = 1);

}  // namespace rnnserve::testing
