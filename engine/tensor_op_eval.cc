#include "engine/tensor_op_eval.h"

#include "engine/cpu/tensor_ops.h"
#include "engine/plan/tensor_op_plans.h"

namespace rnnserve::engine {

int TensorOpOutputCount(const TensorOpSpec& spec) { return plan::TensorOpOutputs(spec); }

absl::Status EvaluateTensorOp(const TensorOpSpec& spec, absl::Span<const Tensor* const> operands,
                              std::vector<Tensor>* outputs) {
  return cpu::EvalTensorOp(spec, operands, outputs);
}

}  // namespace rnnserve::engine
