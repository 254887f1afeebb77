#pragma once

// What a servable learns about a model by running it at load, before it serves: probe batches,
// and the checks made on the model or on the probes' outputs.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/engine.h"
#include "engine/ir.h"

namespace rnnserve::server {

struct TensorSignature;

// A probe batch of B sequences of T steps for every input (T fills every dynamic axis but the
// batch axis), with harmless values: 0.125 for floats, 1 for integer ids. Batch first: each
// input's batch_axis is moved to the front, as the servable's compiled model takes it
// (server/batch_layout.h).
engine::Batch ProbeBatch(const std::vector<TensorSignature>& inputs, int64_t B, int64_t T);

// Two probe rows that differ, for the batch-axis check: ProbeBatch(inputs, 2, 3) with float
// inputs set to values that differ between row 0 and row 1.
engine::Batch DistinctRowsProbe(const std::vector<TensorSignature>& inputs);

// Chunked execution equals whole-sequence execution only when every layer is causal: it sees
// no future step and carries history only in recurrent state. OK, or FAILED_PRECONDITION
// naming the first layer that is not (server/streamable.cc follows each value's time axis).
absl::Status CheckStreamable(const engine::Model& model);

// Given the outputs of a two-row probe (`both`) and of its row 1 alone (`alone`): empty when
// axis 0 of every output holds the rows independently, else why not, naming the output
// (`names[o]`, or its index).
std::string BatchAxisProblem(const std::vector<engine::Tensor>& both,
                             const std::vector<engine::Tensor>& alone,
                             const std::vector<std::string>& names);

}  // namespace rnnserve::server
