#pragma once

// Evaluates a generic tensor op (TensorOpSpec in engine/ir.h) on host tensors: what importers
// call to fold, at load, the ops whose operands are all constants, without reaching into an
// engine's kernels. Semantics and errors are those of the engines' tensor ops.

#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/ir.h"
#include "engine/tensor.h"

namespace rnnserve::engine {

// Number of tensors the op produces (kSplit: one per part; every other op: one).
int TensorOpOutputCount(const TensorOpSpec& spec);

// Evaluates the op over its operands, one per spec.operands entry (null where the operand is
// kAbsent), and fills `outputs` with TensorOpOutputCount(spec) tensors.
absl::Status EvaluateTensorOp(const TensorOpSpec& spec, absl::Span<const Tensor* const> operands,
                              std::vector<Tensor>* outputs);

}  // namespace rnnserve::engine
