#include "server/services/kserve/datatype.h"

#include "absl/strings/str_cat.h"

namespace rnnserve::server::kserve {

absl::StatusOr<v1::DataType> ParseDatatype(absl::string_view datatype, absl::string_view what) {
  if (datatype == "FP32") return v1::TYPE_FP32;
  if (datatype == "INT32") return v1::TYPE_INT32;
  if (datatype == "INT64") return v1::TYPE_INT64;
  if (datatype == "FP64") return v1::TYPE_FP64;
  return absl::InvalidArgumentError(absl::StrCat(what, ": datatype '", datatype,
                                                 "' is not accepted (FP32, FP64, INT32 or INT64)"));
}

int64_t ElementBytes(v1::DataType type) {
  return type == v1::TYPE_INT64 || type == v1::TYPE_FP64 ? 8 : 4;
}

std::string DatatypeName(engine::DType dtype) {
  return dtype == engine::DType::kInt64 ? "INT64" : "FP32";
}

inference::DataType ConfigType(engine::DType dtype) {
  return dtype == engine::DType::kInt64 ? inference::TYPE_INT64 : inference::TYPE_FP32;
}

bool Feeds(v1::DataType given, engine::DType want) {
  if (want == engine::DType::kInt64) {
    return given == v1::TYPE_INT32 || given == v1::TYPE_INT64 || given == v1::TYPE_FP32 ||
           given == v1::TYPE_FP64;
  }
  return given == v1::TYPE_FP32;
}

}  // namespace rnnserve::server::kserve
