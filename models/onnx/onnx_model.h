#pragma once

// ONNX files (.onnx) -> engine IR.
//
// Reads what torch.onnx.export (opsets 14-20) and onnx.helper write: LSTM, GRU and RNN nodes
// with every attribute and optional input, and the shape, layout and head ops around them
// (onnx_ops.cc lists them). Whatever depends only on initializers and constants is folded at
// load; the rest becomes generic tensor-op layers of the IR. Shapes of runtime values are never
// folded, even where the file declares them static, so the shape arithmetic an exporter writes
// (Shape -> Gather -> ConstantOfShape for zero initial states) follows the batch actually run.
// Model inputs and outputs are the graph's, in the graph's order, with the file's shapes (-1 for
// symbolic dims) and layout: a time-major input stays [T, B, ...]. Float inputs are FP32; integer
// inputs (int32 or int64, e.g. sequence_lens or token ids) are INT64.
//
// Refused, each with an error naming the file and the problem: files that are not ONNX
// (wrong magic, garbage, truncation), missing graph or default-domain opset, external data,
// initializers with NaN, undefined tensor names (missing initializers), weight shapes that do
// not match the node, declared sizes past 2^28 elements, and any op outside the supported set
// (named with node, op type and opset).

#include <string>

#include "absl/status/statusor.h"
#include "engine/ir.h"

namespace rnnserve::models::onnx {

// The largest .onnx file read (protobuf's own limit is 2 GiB).
inline constexpr int64_t kMaxOnnxFileBytes = int64_t{1} << 31;

absl::StatusOr<engine::Model> LoadOnnxFile(const std::string& path);

// `bytes` is a serialized ModelProto; `name` stands for the file in errors and the model name.
absl::StatusOr<engine::Model> LoadOnnxBytes(const std::string& bytes, const std::string& name);

}  // namespace rnnserve::models::onnx
