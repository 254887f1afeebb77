#pragma once

// Wire tensors (rnnserve.v1.Tensor) <-> engine tensors. Decoding checks that the values match
// the declared dtype and shape; it knows nothing of any model.

#include <string>

#include "absl/status/statusor.h"
#include "engine/tensor.h"
#include "rnnserve/v1/rnnserve.pb.h"

namespace rnnserve::server {

// `what` names the tensor in errors ("input 'x'").
absl::StatusOr<engine::Tensor> DecodeTensor(const v1::Tensor& proto, const std::string& what);

// An integer (token id) input: integer tensors as DecodeTensor reads them, and TYPE_FP32 /
// TYPE_FP64 tensors whose values are all whole numbers (Keras declares an Embedding model's
// input float32 and takes float ids). A fractional, infinite or NaN value, or one past 2^53,
// is INVALID_ARGUMENT naming `what`, the value's index and the value.
absl::StatusOr<engine::Tensor> DecodeTokenIds(const v1::Tensor& proto, const std::string& what);

// Float tensors as TYPE_FP32 float_val, int tensors as TYPE_INT64 int64_val.
void EncodeTensor(const engine::Tensor& tensor, v1::Tensor* proto);

v1::DataType WireType(engine::DType dtype);

}  // namespace rnnserve::server
