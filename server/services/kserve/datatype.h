#pragma once

// KServe v2 datatype strings ("FP32", "FP64", "INT32", "INT64") <-> our engine dtypes and the
// request core's element types. The engine holds every integer tensor as int64, so INT32 and INT64
// inputs both become engine::DType::kInt64; outputs are named by what the engine produced.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/tensor.h"
#include "inference/model_config.pb.h"
#include "server/core/request.h"

namespace rnnserve::server::kserve {

// The datatypes a request may carry. Anything else is INVALID_ARGUMENT naming `what`.
absl::StatusOr<core::ElementType> ParseDatatype(absl::string_view datatype, absl::string_view what);

// "FP32" for kFloat32, "INT64" for kInt64.
std::string DatatypeName(engine::DType dtype);
// The KServe name of a request's element type ("FP32", "INT32", ...; "BOOL", "UINT8", "FP16").
std::string DatatypeName(core::ElementType type);

// TYPE_FP32 / TYPE_INT64 in Triton's model configuration enum.
inference::DataType ConfigType(engine::DType dtype);

}  // namespace rnnserve::server::kserve
