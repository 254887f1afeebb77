#pragma once

// tensorflow.TensorProto <-> the request core (server/core/request.h).
//
// Decoding makes a view over the message's values: `tensor_content` when it is set, else the
// typed field the dtype names (float_val for DT_FLOAT, double_val, int_val for DT_INT32,
// int64_val, bool_val); the message must outlive the request's run. Which dtypes a model
// takes is the core's to check (core::Validate); what is refused here is what cannot be a view
// at all: an unknown rank, a negative dimension, values of DT_HALF, DT_UINT8 and the like in
// their padded int32 fields (send them as tensor_content), strings.
//
// Encoding follows TF Serving's own Predict: typed fields (float_val, int64_val), not
// tensor_content. Allocate() places an output in the response before it is computed
// (RunOptions::allocate_outputs); Encode() then copies nothing.

#include <string>

#include "absl/status/statusor.h"
#include "engine/tensor.h"
#include "server/core/request.h"
#include "tensorflow/core/framework/tensor.pb.h"

namespace rnnserve::server::tfserving {

// "DT_FLOAT", ... (the number for a value the enum does not name).
std::string DataTypeName(int dtype);
// The TensorFlow dtype of an engine tensor (DT_FLOAT, DT_INT64).
tensorflow::DataType DataTypeOf(engine::DType dtype);

// A view over `proto`'s values under `name`; INVALID_ARGUMENT naming the input otherwise.
absl::StatusOr<core::InputView> ViewOf(const std::string& name,
                                       const tensorflow::TensorProto& proto);

void SetShape(const engine::Shape& shape, tensorflow::TensorShapeProto* proto);

// `proto` as `dtype` and `shape` with room for its values, and an engine tensor over them.
engine::Tensor Allocate(engine::DType dtype, const engine::Shape& shape,
                        tensorflow::TensorProto* proto);
// `tensor` into `proto` (nothing is copied when Allocate() placed it there).
void Encode(const engine::Tensor& tensor, tensorflow::TensorProto* proto);

}  // namespace rnnserve::server::tfserving
