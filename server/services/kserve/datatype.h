#pragma once

// KServe v2 datatype strings ("FP32", "FP64", "INT32", "INT64") <-> our engine dtypes and the
// rnnserve.v1 wire types. The engine holds every integer tensor as int64, so INT32 and INT64
// inputs both become engine::DType::kInt64; outputs are named by what the engine produced.

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "engine/tensor.h"
#include "inference/model_config.pb.h"
#include "rnnserve/v1/model_config.pb.h"

namespace rnnserve::server::kserve {

// The datatypes a request may carry. Anything else is INVALID_ARGUMENT naming `what`.
absl::StatusOr<v1::DataType> ParseDatatype(absl::string_view datatype, absl::string_view what);

// Bytes of one element of an accepted datatype (4 for FP32 and INT32, 8 for INT64 and FP64).
int64_t ElementBytes(v1::DataType type);

// "FP32" for kFloat32, "INT64" for kInt64.
std::string DatatypeName(engine::DType dtype);

// TYPE_FP32 / TYPE_INT64 in Triton's model configuration enum.
inference::DataType ConfigType(engine::DType dtype);

// Whether a request of `given` feeds an input of `want`: INT32 and INT64 feed integers, and so
// do FP32 and FP64 token ids (whole numbers, checked when decoded; Keras takes float ids).
// FP64 feeds nothing else.
bool Feeds(v1::DataType given, engine::DType want);

}  // namespace rnnserve::server::kserve
