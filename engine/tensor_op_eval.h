#pragma once

// Evaluates a generic tensor op (TensorOpSpec in engine/ir.h) on host tensors, in the engine
// core (the kernels are in engine/ops/): what the CPU engine runs for a tensor op layer
// (engine/cpu/tensor_ops.h says the semantics), and what importers call to fold, at load, the
// ops whose operands are all constants, without reaching into an engine.

#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/ir.h"
#include "engine/tensor.h"

namespace rnnserve::engine {

// Number of tensors the op produces (kSplit: one per part; every other op: one).
int TensorOpOutputCount(const TensorOpSpec& spec);

// Evaluates the op over its operands, one per spec.operands entry (null where the operand is
// kAbsent), and fills `outputs` with TensorOpOutputCount(spec) tensors. kAttachLengths returns
// operand 0 unchanged (the lengths live beside tensors, in HostValue).
absl::Status EvaluateTensorOp(const TensorOpSpec& spec, absl::Span<const Tensor* const> operands,
                              std::vector<Tensor>* outputs);

}  // namespace rnnserve::engine
