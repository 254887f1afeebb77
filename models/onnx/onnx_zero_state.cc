// The exporter's zero initial states, recognised so that the recurrent layer has none.
//
// torch.onnx.export writes nn.LSTM / nn.GRU without h0 as a zero tensor built from the input's
// shape: Shape(x) -> Gather(batch) -> Unsqueeze -> Concat([D], B, [H]) -> ConstantOfShape(0)
// (the dynamo exporter: Shape -> Concat -> Expand(0.0, shape)), then a Slice per layer. A layer
// whose initial_h / initial_c is that tensor starts from zeros as one without them does; so
// it is imported without them, and whoever runs it (a stream carrying its state between
// chunks) may give the state instead. The shape chain, then unused, is dropped.

#include <set>
#include <variant>

#include "models/onnx/onnx_graph.h"

namespace rnnserve::models::onnx {
namespace {

using engine::TensorOperand;
using engine::TensorOpKind;
using engine::TensorOpSpec;

bool AllZero(const engine::Tensor& t) {
  for (float v : t.floats()) {
    if (v != 0.0f) return false;
  }
  for (int64_t v : t.ints()) {
    if (v != 0) return false;
  }
  return true;
}

const engine::Layer* Producer(const engine::Model& model, int value) {
  for (auto it = model.layers.rbegin(); it != model.layers.rend(); ++it) {
    for (int out : it->outputs) {
      if (out == value) return &*it;
    }
  }
  return nullptr;
}

// Ops that give zeros from zeros when only operand 0 is a runtime value.
bool KeepsZeros(TensorOpKind kind) {
  switch (kind) {
    case TensorOpKind::kSlice:
    case TensorOpKind::kGather:
    case TensorOpKind::kSqueeze:
    case TensorOpKind::kUnsqueeze:
    case TensorOpKind::kTranspose:
    case TensorOpKind::kReshape:
    case TensorOpKind::kCast:
      return true;
    default:
      return false;
  }
}

}  // namespace

bool IsZeroTensor(const Ref& ref, const engine::Model& model) {
  if (ref.absent) return false;
  if (ref.is_constant()) return AllZero(ref.constant);
  int value = ref.id;
  for (int depth = 0; depth < 16; ++depth) {
    const engine::Layer* layer = Producer(model, value);
    if (layer == nullptr) return false;
    const auto* op = std::get_if<TensorOpSpec>(&layer->spec);
    if (op == nullptr || op->operands.empty()) return false;
    const TensorOperand& data = op->operands[0];
    if (op->kind == TensorOpKind::kConstantOfShape) return AllZero(op->value);
    if (op->kind == TensorOpKind::kExpand) {
      return data.source == TensorOperand::Source::kConstant && AllZero(data.constant);
    }
    if (!KeepsZeros(op->kind) || data.source != TensorOperand::Source::kInput ||
        layer->inputs.size() != 1) {
      return false;
    }
    value = layer->inputs[0];
  }
  return false;
}

void DropUnusedTensorOps(engine::Model* model) {
  std::set<int> used(model->output_values.begin(), model->output_values.end());
  std::vector<engine::Layer> kept;
  for (auto it = model->layers.rbegin(); it != model->layers.rend(); ++it) {
    bool needed = !std::holds_alternative<TensorOpSpec>(it->spec);
    for (int out : it->outputs) needed |= used.count(out) > 0;
    if (!needed) continue;
    used.insert(it->inputs.begin(), it->inputs.end());
    kept.push_back(std::move(*it));
  }
  model->layers.assign(std::make_move_iterator(kept.rbegin()),
                       std::make_move_iterator(kept.rend()));
}

}  // namespace rnnserve::models::onnx
