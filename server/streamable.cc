// CheckStreamable (model_probe.h): whether chunks of a sequence, run one after another with
// the recurrent state carried between them, give what the whole sequence gives.
//
// The model's values are followed from its inputs (batch first, time on axis 1) with where
// their time axis lies: a layer that works on each step alone keeps it (Keras's per-step
// layers; ONNX's transposes, squeezes, reshapes that copy the leading axes, element-wise ops
// whose constants do not vary along time, MatMul over the features), a recurrent layer must
// read time on axis 1, and anything else is refused, naming the layer.

#include <algorithm>
#include <optional>
#include <variant>

#include "absl/strings/str_cat.h"
#include "server/model_probe.h"

namespace rnnserve::server {
namespace {

using engine::TensorOperand;
using engine::TensorOpKind;
using engine::TensorOpSpec;

// A value's time axis (-1: none) and rank (-1: unknown).
struct TimeAxis {
  int64_t axis = -1;
  int64_t rank = -1;
};

bool PerStepLayer(const engine::LayerSpec& spec) {
  return std::holds_alternative<engine::DenseSpec>(spec) ||
         std::holds_alternative<engine::MaskingSpec>(spec) ||
         std::holds_alternative<engine::EmbeddingSpec>(spec) ||
         std::holds_alternative<engine::ActivationSpec>(spec) ||
         std::holds_alternative<engine::IdentitySpec>(spec) ||
         std::holds_alternative<engine::BatchNormSpec>(spec) ||
         std::holds_alternative<engine::LayerNormSpec>(spec);
}

std::optional<std::vector<int64_t>> ConstantInts(const TensorOperand& op) {
  if (op.source != TensorOperand::Source::kConstant) return std::nullopt;
  const auto ints = op.constant.ints();
  return std::vector<int64_t>(ints.begin(), ints.end());
}

// Where a tensor op's output holds time, or nullopt when the op mixes or drops time steps.
// `in` holds the time axes of the op's runtime operands, in operand order.
std::optional<TimeAxis> ThroughTensorOp(const TensorOpSpec& op, const std::vector<TimeAxis>& in) {
  if (op.kind == TensorOpKind::kConstant) return TimeAxis{};
  if (in.empty()) return std::nullopt;
  const TimeAxis x = in[0];
  bool any_time = false;
  for (const TimeAxis& t : in) any_time |= t.axis >= 0;
  // Nothing per-step flows in (constants, final states): the result has no time axis.
  if (!any_time) return TimeAxis{};
  switch (op.kind) {
    case TensorOpKind::kTranspose: {
      const auto at = std::find(op.ints.begin(), op.ints.end(), x.axis);
      if (at == op.ints.end()) return std::nullopt;
      return TimeAxis{.axis = at - op.ints.begin(), .rank = x.rank};
    }
    case TensorOpKind::kSqueeze:
    case TensorOpKind::kUnsqueeze: {
      const auto axes = op.operands.size() > 1 ? ConstantInts(op.operands[1]) : std::nullopt;
      if (!axes || axes->empty()) return std::nullopt;
      std::vector<int64_t> sorted = *axes;
      std::sort(sorted.begin(), sorted.end());
      if (sorted.front() < 0) return std::nullopt;
      const int64_t n = static_cast<int64_t>(sorted.size());
      int64_t t = x.axis;
      if (op.kind == TensorOpKind::kSqueeze) {
        if (std::count(sorted.begin(), sorted.end(), t)) return std::nullopt;
        t -= std::count_if(sorted.begin(), sorted.end(), [&](int64_t a) { return a < x.axis; });
        return TimeAxis{.axis = t, .rank = x.rank < 0 ? -1 : x.rank - n};
      }
      for (int64_t a : sorted) t += a <= t ? 1 : 0;
      return TimeAxis{.axis = t, .rank = x.rank < 0 ? -1 : x.rank + n};
    }
    case TensorOpKind::kReshape: {
      // Kept when every axis up to time is copied (0 in the shape, allowzero off).
      const auto shape = op.operands.size() > 1 ? ConstantInts(op.operands[1]) : std::nullopt;
      if (!shape || op.allow_zero || static_cast<int64_t>(shape->size()) <= x.axis) {
        return std::nullopt;
      }
      for (int64_t a = 0; a <= x.axis; ++a) {
        if ((*shape)[a] != 0) return std::nullopt;
      }
      return TimeAxis{.axis = x.axis, .rank = static_cast<int64_t>(shape->size())};
    }
    case TensorOpKind::kActivation:
    case TensorOpKind::kNeg:
    case TensorOpKind::kAbs:
    case TensorOpKind::kSqrt:
    case TensorOpKind::kExp:
    case TensorOpKind::kLog:
    case TensorOpKind::kReciprocal:
    case TensorOpKind::kCast:
      return x;
    case TensorOpKind::kSoftmax:
    case TensorOpKind::kLogSoftmax: {
      const int64_t axis = op.axis < 0 && x.rank > 0 ? op.axis + x.rank : op.axis;
      if (op.coerce_2d || axis < 0 || axis == x.axis) return std::nullopt;
      return x;
    }
    case TensorOpKind::kMatMul:
      // [..., T, ..., K] x constant [K, N]: time must not be the contracted axis.
      if (op.operands.size() != 2 || op.operands[1].source != TensorOperand::Source::kConstant ||
          x.rank < 0 || x.axis >= x.rank - 1) {
        return std::nullopt;
      }
      return x;
    case TensorOpKind::kAdd:
    case TensorOpKind::kSub:
    case TensorOpKind::kMul:
    case TensorOpKind::kDiv:
    case TensorOpKind::kPow:
    case TensorOpKind::kMin:
    case TensorOpKind::kMax: {
      TimeAxis out{.axis = -1, .rank = -1};
      for (const TimeAxis& t : in) {
        if (t.axis < 0) return std::nullopt;  // a runtime value without time: unknown broadcast
        if (out.axis >= 0 && (t.axis != out.axis || t.rank != out.rank)) return std::nullopt;
        out = t;
      }
      // Constants broadcast from the right; one that varies along time is refused.
      for (const TensorOperand& c : op.operands) {
        if (c.source != TensorOperand::Source::kConstant) continue;
        if (out.rank < 0) {
          if (c.constant.rank() > 1) return std::nullopt;
          continue;
        }
        const int64_t at = out.axis - (out.rank - c.constant.rank());
        if (at >= 0 && at < c.constant.rank() && c.constant.dim(static_cast<int>(at)) != 1) {
          return std::nullopt;
        }
      }
      return out;
    }
    default:
      return std::nullopt;
  }
}

}  // namespace

absl::Status CheckStreamable(const engine::Model& model) {
  std::vector<TimeAxis> values(std::max(model.num_values, 0));
  for (size_t i = 0; i < model.inputs.size() && i < values.size(); ++i) {
    const int64_t rank = static_cast<int64_t>(model.inputs[i].shape.size());
    values[i] = rank == 0 ? TimeAxis{.axis = 1, .rank = -1}
                          : TimeAxis{.axis = rank >= 2 ? 1 : -1, .rank = rank};
  }
  auto at = [&](int v) {
    return v >= 0 && v < static_cast<int>(values.size()) ? values[v] : TimeAxis{};
  };
  for (const engine::Layer& layer : model.layers) {
    const engine::LayerSpec& spec = layer.spec;
    const TimeAxis x = layer.inputs.empty() ? TimeAxis{} : at(layer.inputs[0]);
    std::string why;
    std::vector<TimeAxis> outs(layer.outputs.size(), x);
    if (const auto* r = std::get_if<engine::RecurrentSpec>(&spec)) {
      if (r->directions.size() != 1 || r->directions[0].reverse) {
        why = "runs backwards over the sequence (bidirectional or reverse)";
      } else if (x.axis >= 0 && x.axis != 1) {
        why = absl::StrCat("reads its sequence with time on axis ", x.axis);
      }
      std::fill(outs.begin(), outs.end(), TimeAxis{.axis = -1, .rank = 2});
      if (!outs.empty() && r->return_sequences) outs[0] = TimeAxis{.axis = 1, .rank = 3};
    } else if (const auto* sm = std::get_if<engine::SoftmaxSpec>(&spec)) {
      if (sm->axis != -1) why = "normalises over an axis other than the features";
    } else if (const auto* op = std::get_if<TensorOpSpec>(&spec)) {
      std::vector<TimeAxis> in;
      for (int v : layer.inputs) in.push_back(at(v));
      const auto out = ThroughTensorOp(*op, in);
      if (out) {
        std::fill(outs.begin(), outs.end(), *out);
      } else {
        why = "needs the whole sequence at once";
      }
    } else if (!PerStepLayer(spec)) {
      why = "needs the whole sequence at once";
    }
    if (!why.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("layer '", layer.name, "' (", layer.source_class, ") ", why,
                       ": StreamPredict needs a model whose layers are all causal; use Predict"));
    }
    for (size_t k = 0; k < layer.outputs.size(); ++k) {
      if (layer.outputs[k] >= 0 && layer.outputs[k] < static_cast<int>(values.size())) {
        values[layer.outputs[k]] = outs[k];
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace rnnserve::server
