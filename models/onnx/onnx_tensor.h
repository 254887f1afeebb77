#pragma once

// ONNX TensorProto -> engine::Tensor.
//
// FLOAT, DOUBLE, FLOAT16 and BFLOAT16 become float32; INT64, INT32, INT16, INT8, UINT8, UINT16,
// UINT32 and BOOL become int64 (shape arithmetic and token ids). Data may sit in raw_data
// (little-endian) or in the typed fields. Refused, with an error naming the tensor: external
// data, string and complex types, negative dims, more than kMaxOnnxTensorElements elements, and
// data whose size does not match the dims.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/tensor.h"
#include "models/onnx/onnx.pb.h"

namespace rnnserve::models::onnx {

// The largest tensor a file may declare (2^28 elements, 1 GiB of float32).
inline constexpr int64_t kMaxOnnxTensorElements = int64_t{1} << 28;

// `what` names the tensor in errors (e.g. "initializer 'W'").
absl::StatusOr<engine::Tensor> TensorFromProto(const TensorProto& proto, const std::string& what);

// The name ONNX gives a TensorProto.DataType value ("FLOAT", "INT64", ...).
std::string OnnxTypeName(int data_type);

// True when every float element is finite (int tensors always are).
bool AllFinite(const engine::Tensor& t);

}  // namespace rnnserve::models::onnx
