#pragma once

// Batch axes other than axis 0.
//
// The server batches, splits, pads and probes along axis 0 of every tensor. A model file may
// hold the batch elsewhere (engine::ValueInfo::batch_axis): ONNX recurrent states
// [num_layers * num_directions, batch, hidden] as h0 / c0 inputs and h_n / c_n outputs,
// time-major inputs [time, batch, features]. Such a model is compiled from its batch-first
// view (BatchFirstModel: transposes around the graph), and the servable moves each request's
// tensors between the file's layout, which clients send and receive (TensorSignature::
// batch_axis), and batch first (ToBatchFirst / FromBatchFirst).

#include <vector>

#include "engine/engine.h"
#include "engine/ir.h"
#include "engine/tensor.h"

namespace rnnserve::server {

// `shape` with axis `from` moved to position `to`, the other axes in order.
engine::Shape MoveAxis(engine::Shape shape, int from, int to);

// `t` with axis `from` moved to position `to` (a copy; `t` itself when from == to).
engine::Tensor MoveTensorAxis(const engine::Tensor& t, int from, int to);

// Whether any input or output of `model` holds its batch on an axis other than 0.
bool HasMovedBatchAxes(const engine::Model& model);

// `model` with every input and output batch first (batch_axis 0): an input whose batch is on
// axis k > 0 becomes a batch-first input followed by a transpose to the file's layout, which
// the graph reads as before; such an output gets a transpose to batch first.
engine::Model BatchFirstModel(engine::Model model);

// The batch's inputs (in the file's layout, input i with its batch on axes[i]) batch first.
void ToBatchFirst(const std::vector<int>& axes, engine::Batch* batch);

// Outputs (batch first) back to the file's layout: output o with its batch on axes[o].
void FromBatchFirst(const std::vector<int>& axes, std::vector<engine::Tensor>* outputs);

}  // namespace rnnserve::server
