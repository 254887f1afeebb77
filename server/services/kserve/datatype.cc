#include "server/services/kserve/datatype.h"

#include "absl/strings/str_cat.h"

namespace rnnserve::server::kserve {

absl::StatusOr<core::ElementType> ParseDatatype(absl::string_view datatype,
                                                absl::string_view what) {
  if (datatype == "FP32") return core::ElementType::kFp32;
  if (datatype == "INT32") return core::ElementType::kInt32;
  if (datatype == "INT64") return core::ElementType::kInt64;
  if (datatype == "FP64") return core::ElementType::kFp64;
  return absl::InvalidArgumentError(absl::StrCat(what, ": datatype '", datatype,
                                                 "' is not accepted (FP32, FP64, INT32 or INT64)"));
}

std::string DatatypeName(engine::DType dtype) {
  return dtype == engine::DType::kInt64 ? "INT64" : "FP32";
}

std::string DatatypeName(core::ElementType type) {
  switch (type) {
    case core::ElementType::kBool:
      return "BOOL";
    case core::ElementType::kUint8:
      return "UINT8";
    case core::ElementType::kInt32:
      return "INT32";
    case core::ElementType::kInt64:
      return "INT64";
    case core::ElementType::kFp16:
      return "FP16";
    case core::ElementType::kFp64:
      return "FP64";
    case core::ElementType::kFp32:
      return "FP32";
    default:
      return "INVALID";
  }
}

inference::DataType ConfigType(engine::DType dtype) {
  return dtype == engine::DType::kInt64 ? inference::TYPE_INT64 : inference::TYPE_FP32;
}

}  // namespace rnnserve::server::kserve
