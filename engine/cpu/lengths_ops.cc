// The request-lengths ops (engine/lengths_rewrite.h puts them in): they read the lengths a
// value carries beside its tensor, so they run on Values, not on tensors alone.

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/cpu/tensor_ops.h"
#include "engine/ops/lengths_ops.h"
#include "engine/plan/tensor_op_plans.h"

namespace rnnserve::engine::cpu {

absl::Status RunLengthsOp(const TensorOpSpec& spec, const Layer& layer,
                          std::vector<Value>* values) {
  if (layer.inputs.size() != 2 || layer.outputs.size() != 1 || spec.operands.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", layer.name,
                                                   "': ", TensorOpName(spec.kind),
                                                   " takes a value and a sequence input"));
  }
  const Value& x = (*values)[layer.inputs[0]];
  const std::vector<int32_t>& request = (*values)[layer.inputs[1]].lengths;
  Value out;
  if (auto s = EvalLengthsOp(spec, x.tensor, request, &out.tensor); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", layer.name, "': ", s.message()));
  }
  if (spec.kind == TensorOpKind::kAttachRequestLengths) {
    // The shorter of the lengths it carries (an ONNX sequence_lens) and the request's.
    out.lengths = x.lengths.empty() ? request : x.lengths;
    if (!x.lengths.empty() && !request.empty()) {
      if (request.size() != x.lengths.size()) {
        return absl::InvalidArgumentError(absl::StrCat("layer '", layer.name, "': ", request.size(),
                                                       " lengths for a batch of ",
                                                       x.lengths.size()));
      }
      for (size_t b = 0; b < request.size(); ++b) {
        out.lengths[b] = std::min(out.lengths[b], request[b]);
      }
    }
    const Shape& s = x.tensor.shape();
    if (!out.lengths.empty() &&
        (s.size() < 2 || static_cast<int64_t>(out.lengths.size()) != s[0] ||
         *std::max_element(out.lengths.begin(), out.lengths.end()) > s[1])) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer '", layer.name, "': lengths do not fit ", ShapeString(s)));
    }
  }
  (*values)[layer.outputs[0]] = std::move(out);
  return absl::OkStatus();
}

}  // namespace rnnserve::engine::cpu
