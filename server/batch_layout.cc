#include "server/batch_layout.h"

#include <utility>

#include "engine/tensor_op_eval.h"

namespace rnnserve::server {
namespace {

// The Transpose perm that moves axis `from` of a rank-`rank` tensor to position `to`.
std::vector<int64_t> MovePerm(int rank, int from, int to) {
  engine::Shape perm;
  for (int64_t a = 0; a < rank; ++a) perm.push_back(a);
  return MoveAxis(std::move(perm), from, to);
}

engine::Layer Transpose(const std::string& name, std::vector<int64_t> perm, int in, int out) {
  engine::Layer layer;
  layer.name = name;
  layer.source_class = "Transpose";
  layer.spec = engine::TensorOpSpec{.kind = engine::TensorOpKind::kTranspose,
                                    .operands = {engine::TensorOperand{}},
                                    .ints = std::move(perm)};
  layer.inputs = {in};
  layer.outputs = {out};
  return layer;
}

}  // namespace

engine::Shape MoveAxis(engine::Shape shape, int from, int to) {
  if (from == to || from < 0 || to < 0 || from >= static_cast<int>(shape.size()) ||
      to >= static_cast<int>(shape.size())) {
    return shape;
  }
  const int64_t d = shape[from];
  shape.erase(shape.begin() + from);
  shape.insert(shape.begin() + to, d);
  return shape;
}

engine::Tensor MoveTensorAxis(const engine::Tensor& t, int from, int to) {
  if (from == to || from >= t.rank() || to >= t.rank()) return t;
  const engine::TensorOpSpec spec{.kind = engine::TensorOpKind::kTranspose,
                                  .operands = {engine::TensorOperand{}},
                                  .ints = MovePerm(t.rank(), from, to)};
  const engine::Tensor* operand = &t;
  std::vector<engine::Tensor> out;
  // A transpose of a tensor of the given rank cannot fail.
  (void)engine::EvaluateTensorOp(spec, {&operand, 1}, &out);
  return out.empty() ? t : std::move(out[0]);
}

bool HasMovedBatchAxes(const engine::Model& model) {
  for (const engine::ValueInfo& v : model.inputs) {
    if (v.batch_axis != 0) return true;
  }
  for (const engine::ValueInfo& v : model.outputs) {
    if (v.batch_axis != 0) return true;
  }
  return false;
}

engine::Model BatchFirstModel(engine::Model model) {
  std::vector<engine::Layer> front;
  for (size_t i = 0; i < model.inputs.size(); ++i) {
    engine::ValueInfo& in = model.inputs[i];
    const int k = in.batch_axis;
    if (k == 0) continue;
    // Value i becomes the batch-first input; the graph reads its transpose in the file's layout.
    const int file_layout = model.num_values++;
    for (engine::Layer& layer : model.layers) {
      for (int& v : layer.inputs) {
        if (v == static_cast<int>(i)) v = file_layout;
      }
    }
    for (int& v : model.output_values) {
      if (v == static_cast<int>(i)) v = file_layout;
    }
    front.push_back(Transpose(in.name + "/from_batch_first",
                              MovePerm(static_cast<int>(in.shape.size()), 0, k),
                              static_cast<int>(i), file_layout));
    in.shape = MoveAxis(in.shape, k, 0);
    in.batch_axis = 0;
  }
  model.layers.insert(model.layers.begin(), std::make_move_iterator(front.begin()),
                      std::make_move_iterator(front.end()));
  for (size_t o = 0; o < model.outputs.size(); ++o) {
    engine::ValueInfo& out = model.outputs[o];
    const int k = out.batch_axis;
    if (k == 0) continue;
    const int batch_first = model.num_values++;
    model.layers.push_back(Transpose(out.name + "/to_batch_first",
                                     MovePerm(static_cast<int>(out.shape.size()), k, 0),
                                     model.output_values[o], batch_first));
    model.output_values[o] = batch_first;
    out.shape = MoveAxis(out.shape, k, 0);
    out.batch_axis = 0;
  }
  return model;
}

void ToBatchFirst(const std::vector<int>& axes, engine::Batch* batch) {
  for (size_t i = 0; i < axes.size() && i < batch->inputs.size(); ++i) {
    if (axes[i] != 0) batch->inputs[i] = MoveTensorAxis(batch->inputs[i], axes[i], 0);
  }
}

void FromBatchFirst(const std::vector<int>& axes, std::vector<engine::Tensor>* outputs) {
  for (size_t o = 0; o < axes.size() && o < outputs->size(); ++o) {
    if (axes[o] != 0) (*outputs)[o] = MoveTensorAxis((*outputs)[o], 0, axes[o]);
  }
}

}  // namespace rnnserve::server
