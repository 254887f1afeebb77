#include "engine/cpu/tensor_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/plan/tensor_op_plans.h"
#include "engine/tensor_op_eval.h"

namespace rnnserve::engine::cpu {

using plan::AttachedLengths;

absl::Status RunTensorOp(const TensorOpSpec& spec, const Layer& layer, std::vector<Value>* values) {
  if (spec.kind == TensorOpKind::kAttachRequestLengths ||
      spec.kind == TensorOpKind::kGatherAtLengths || spec.kind == TensorOpKind::kZeroPastLengths) {
    return RunLengthsOp(spec, layer, values);
  }
  std::vector<const Tensor*> operands;
  size_t next = 0;
  for (const TensorOperand& op : spec.operands) {
    switch (op.source) {
      case TensorOperand::Source::kInput:
        if (next >= layer.inputs.size()) {
          return absl::InvalidArgumentError(
              absl::StrCat("layer '", layer.name, "' has fewer inputs than operands"));
        }
        operands.push_back(&(*values)[layer.inputs[next++]].tensor);
        break;
      case TensorOperand::Source::kConstant:
        operands.push_back(&op.constant);
        break;
      case TensorOperand::Source::kAbsent:
        operands.push_back(nullptr);
        break;
    }
  }
  std::vector<Tensor> results;
  if (auto s = EvaluateTensorOp(spec, operands, &results); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", layer.name, "': ", s.message()));
  }
  std::vector<int32_t> lengths;
  if (spec.kind == TensorOpKind::kAttachLengths) {
    auto attached = AttachedLengths(layer.name, operands[0]->shape(), *operands[1]);
    if (!attached.ok()) return attached.status();
    lengths = std::move(*attached);
  }
  if (results.size() < layer.outputs.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", layer.name, "' declares ", layer.outputs.size(), " outputs; ",
                     TensorOpName(spec.kind), " makes ", results.size()));
  }
  for (size_t i = 0; i < layer.outputs.size(); ++i) {
    Value& v = (*values)[layer.outputs[i]];
    v.tensor = std::move(results[i]);
    v.lengths = i == 0 ? lengths : std::vector<int32_t>{};
  }
  return absl::OkStatus();
}

}  // namespace rnnserve::engine::cpu